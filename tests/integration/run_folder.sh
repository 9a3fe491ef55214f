# run_folder.sh: a run folder has one owner and is never silently replaced
# or mixed (issue 12, reliability R17-R21). A second sweep run, resume, plot
# or import into a folder a run holds fails at once with exit 3 naming the
# holder's pid, and the server does not inherit the lock; a non-empty --out
# is refused (exit 2) unless --force moves it into previous-N/; --resume
# refuses a folder of another experiment (exit 2, naming the field) and
# says what it adds, and a folder whose rows no longer match their keys (the
# model file changed); a result that cannot be written (fit.json, a chart,
# REPORT.md, output on stdout, a full filesystem) is exit 3 with points.csv
# left as it was; import and compare --out do not write into a run.
. tests/lib.sh
cd "$T_TMP" || exit 1

# The client waits for $T_TMP/go, so the first run holds its folder for as
# long as the test needs (no timing involved).
cat >gate.sh <<SH
#!/bin/sh
while [ ! -e "$T_TMP/go" ]; do sleep 0.05; done
exec "$MINICLIENT" "\$@"
SH
chmod +x gate.sh
exp() { # FILE [KEY=VALUE...]
    local f=$1
    shift
    make_experiment fakeserver "$f" NAME=folder PIDFILE="$T_TMP/srv.pid" MINICLIENT="$T_TMP/gate.sh" \
        OUTPUT_LEN=4 GRID='["1:2", "2:2"]' "$@"
}
exp f.yaml

# ---- R17: one owner at a time ----
"$SWEEP" run f.yaml --out run >first.out 2>first.err &
first=$!
track_pid "$first"
wait_file srv.pid 30 || fail "the first run's server did not start"
wait_file run/default/c1-n2.log 30 || fail "the first run's client did not start"
srv=$(cat srv.pid)
check_eq "the lock file holds the owner's pid" "$(cat run/.sweep.lock)" "$first"
# (the timeouts only end a second run that was let in and waits on the gate)
timeout -k 5 60 "$SWEEP" run f.yaml --out run >o.txt 2>e.txt
check_eq "second run into the same --out: exit 3" "$?" 3
check "second run: names the holder's pid" grep -q "run folder 'run' is in use by pid $first" e.txt
check_eq "second run: one line" "$(wc -l <e.txt)" 1
timeout -k 5 60 "$SWEEP" run f.yaml --resume run >o.txt 2>e.txt
check_eq "--resume of a folder in use: exit 3" "$?" 3
check "--resume of a folder in use: names the pid" grep -q "in use by pid $first" e.txt
"$SWEEP" plot run --no-preview >o.txt 2>e.txt
check_eq "plot of a folder in use: exit 3" "$?" 3
check "plot of a folder in use: names the pid" grep -q "in use by pid $first" e.txt
check "plot of a folder in use: wrote nothing" test ! -e run/points.csv.bak
printf 'Successful requests: 4\nMax request concurrency: 1\n' >c1-n4.log
"$SWEEP" import c1-n4.log --out run --no-preview >o.txt 2>e.txt
check_eq "import into a folder in use: exit 3" "$?" 3
check "the owner holds the lock fd" sh -c "ls -l /proc/$first/fd | grep -q '.sweep.lock'"
check "the server did not inherit it (CLOEXEC)" sh -c "! ls -l /proc/$srv/fd | grep -q '.sweep.lock'"
touch go
wait "$first"
check_eq "the first run is unharmed: exit 0" "$?" 0
check_eq "the first run is unharmed: 2 ok rows" "$(col run status | tr '\n' ' ')" "ok ok "
check "no log was renamed by another run" test ! -e run/default/c1-n2.log.1
"$SWEEP" plot run --no-preview >o.txt 2>e.txt
check_eq "once the run ended the folder is free: plot exit 0" "$?" 0

# ---- R18: --out never replaces a run ----
cp run/points.csv before.csv
"$SWEEP" run f.yaml --out run >o.txt 2>e.txt
check_eq "--out of a finished run: exit 2" "$?" 2
check "--out of a finished run: names it, suggests --resume and --force" \
    grep -q "\-\-out 'run' is not empty.*--resume run.*--force" e.txt
check "--out of a finished run: points.csv untouched" cmp -s before.csv run/points.csv
"$SWEEP" run f.yaml --out run --force >o.txt 2>e.txt
check_eq "--force: exit 0" "$?" 0
check "--force: the old run is in previous-1, byte for byte" cmp -s before.csv run/previous-1/points.csv
check "--force: the old report and logs are kept" test -s run/previous-1/REPORT.md -a -s run/previous-1/default/c1-n2.log
check "--force: says where they went" grep -q "moved what run held into run/previous-1" e.txt
check_eq "--force: a fresh run in the folder" "$(rows run)" 2
"$SWEEP" run f.yaml --out run --force >o.txt 2>e.txt
check "--force again: previous-2, previous-1 kept" test -s run/previous-2/points.csv -a -s run/previous-1/points.csv
check "--force again: previous-1 not nested" test ! -e run/previous-2/previous-1
mkdir empty
"$SWEEP" run f.yaml --out empty >o.txt 2>e.txt
check_eq "an empty --out is fine" "$?" 0
"$SWEEP" run f.yaml --resume run --force >o.txt 2>e.txt
check_eq "--force with --resume: exit 2" "$?" 2

# ---- R19: --resume continues the same experiment only ----
"$SWEEP" run f.yaml --out res >o.txt 2>e.txt
cp res/points.csv res-before.csv
cp res/experiment.yaml res-before.yaml
refused() { # DESC WANT_IN_MESSAGE EXPERIMENT
    "$SWEEP" run "$3" --resume res >o.txt 2>e.txt
    check_eq "resume with $1: exit 2" "$?" 2
    check "resume with $1: the message names '$2'" grep -q "$2" e.txt
    check "resume with $1: points.csv untouched" cmp -s res-before.csv res/points.csv
    check "resume with $1: experiment.yaml untouched" cmp -s res-before.yaml res/experiment.yaml
}
exp other.yaml NAME=another
refused "another experiment's name" "holds experiment 'folder', not 'another'" other.yaml
exp flags.yaml STEP_A=9
refused "other server flags" "variant 'default': server.flags differs" flags.yaml
exp cmd.yaml SERVER_ARGS=', --quiet'
refused "another server command" "server.command differs" cmd.yaml
exp len.yaml OUTPUT_LEN=8
refused "another output_len" "bench.output_len differs" len.yaml
exp var.yaml EXTRA="variants:
  - {name: slow, server: {flags: {step-a-ms: 12}}}"
refused "the folder's variant dropped" "variant 'default' is not in" var.yaml
printf 'weights one' >m.bin
exp mod.yaml SERVER_LINES="  model: $T_TMP/m.bin"
"$SWEEP" run mod.yaml --out modrun >o.txt 2>e.txt
check_eq "a run with a model file: exit 0" "$?" 0
cp modrun/points.csv mod-before.csv
printf 'weights two' >m.bin
"$SWEEP" run mod.yaml --resume modrun >o.txt 2>e.txt
check_eq "resume after the model file changed: exit 2" "$?" 2
check "resume after the model file changed: names the model" grep -q "the model file '$T_TMP/m.bin' is not the one" e.txt
check "resume after the model file changed: points.csv untouched" cmp -s mod-before.csv modrun/points.csv
cp -r res broken
echo '{broken' >broken/manifest.json
"$SWEEP" run f.yaml --resume broken >o.txt 2>e.txt
check_eq "resume with a manifest.json that does not parse: exit 2" "$?" 2
check "resume with a broken manifest.json: names it with its position" grep -q "broken/manifest.json:1:" e.txt
check_eq "resume with a broken manifest.json: not replaced" "$(cat broken/manifest.json)" "{broken"
mkdir bare
cp res/points.csv bare/
"$SWEEP" run f.yaml --resume bare >o.txt 2>e.txt
check_eq "resume of a folder without experiment.yaml: exit 2" "$?" 2
exp grow.yaml GRID='["1:2", "2:2", "4:4"]' EXTRA="variants:
  - {name: default}
  - {name: fast, server: {flags: {step-a-ms: 2}}}"
"$SWEEP" run grow.yaml --resume res >o.txt 2>e.txt
check_eq "resume adding points and a variant: exit 0" "$?" 0
check "says it adds a point" grep -q "resume: variant 'default': adding 1 point" e.txt
check "says it adds a variant" grep -q "resume: adding variant 'fast' (3 point" e.txt
check_eq "the old rows kept, the new ones added" "$(rows res)" 6
check "the earlier points were not rerun" test ! -e res/default/c1-n2.log.1

# ---- R20: a result that cannot be written is an error ----
cp run/points.csv run-before.csv
rm -f run/REPORT.md
mkdir run/REPORT.md
"$SWEEP" run f.yaml --resume run >o.txt 2>e.txt
check_eq "REPORT.md cannot be written: run exit 3" "$?" 3
check "REPORT.md cannot be written: named" grep -q "REPORT.md" e.txt
check "REPORT.md cannot be written: points.csv intact" cmp -s run-before.csv run/points.csv
"$SWEEP" plot run --no-preview >o.txt 2>e.txt
check_eq "REPORT.md cannot be written: plot exit 3" "$?" 3
rmdir run/REPORT.md
rm -f run/fit.json
mkdir run/fit.json
"$SWEEP" run f.yaml --resume run >o.txt 2>e.txt
check_eq "fit.json cannot be written: run exit 3" "$?" 3
check "fit.json cannot be written: named" grep -q "fit.json" e.txt
rmdir run/fit.json
rm -f run/plots/throughput.dat
mkdir run/plots/throughput.dat
"$SWEEP" run f.yaml --resume run >o.txt 2>e.txt
check_eq "a chart cannot be written: run exit 3" "$?" 3
check "a chart cannot be written: named" grep -q "throughput.dat" e.txt
check "a chart cannot be written: points.csv intact" cmp -s run-before.csv run/points.csv
rmdir run/plots/throughput.dat
"$SWEEP" run f.yaml --resume run >/dev/full 2>e.txt
check_eq "summary to a full stdout: run exit 3" "$?" 3
check "summary to a full stdout: said" grep -q "stdout" e.txt
"$SWEEP" plot run --no-preview >/dev/full 2>e.txt
check_eq "summary to a full stdout: plot exit 3" "$?" 3
"$SWEEP" extract run/default/c1-n2.log >/dev/full 2>e.txt
check_eq "JSON to a full stdout: extract exit 3" "$?" 3
"$SWEEP" check f.yaml >/dev/full 2>e.txt
check_eq "plan to a full stdout: check exit 3" "$?" 3
SWEEP_GNUPLOT=/nonexistent/gnuplot "$SWEEP" run f.yaml --resume run >o.txt 2>e.txt
check_eq "no gnuplot is not a write error for run: exit 0" "$?" 0
check "no gnuplot: warned" grep -q "gnuplot not found" e.txt
# a full filesystem (a tiny tmpfs; needs root and mount, else skipped)
mkdir full
if mount -t tmpfs -o size=512k tmpfs full 2>/dev/null; then
    trap 'umount "$T_TMP/full" 2>/dev/null; t_cleanup' EXIT
    mkdir full/run
    (cd run && tar cf - --exclude='./previous-*' .) | (cd full/run && tar xf -)
    cp full/run/points.csv full-before.csv
    dd if=/dev/zero of=full/filler bs=4k 2>/dev/null
    "$SWEEP" plot full/run --no-preview >o.txt 2>e.txt
    check_eq "full filesystem: plot exit 3" "$?" 3
    check "full filesystem: plot names the file" grep -q "No space left on device" e.txt
    check "full filesystem: plot left points.csv intact" cmp -s full-before.csv full/run/points.csv
    "$SWEEP" run f.yaml --resume full/run >o.txt 2>e.txt
    check_eq "full filesystem: run exit 3" "$?" 3
    check "full filesystem: run left points.csv intact" cmp -s full-before.csv full/run/points.csv
    umount full
else
    echo "skipped: full filesystem (cannot mount a tmpfs here)"
fi

# ---- R21: no other command mixes into or replaces a run ----
cp run/points.csv run-before.csv
"$SWEEP" import c1-n4.log --out run --no-preview >o.txt 2>e.txt
check_eq "import into a sweep run's folder: exit 2" "$?" 2
check "import into a sweep run's folder: says why" grep -q "holds a run made by 'sweep run'" e.txt
check "import into a sweep run's folder: points.csv untouched" cmp -s run-before.csv run/points.csv
"$SWEEP" import c1-n4.log --out imp --no-preview >o.txt 2>e.txt
check "import into a new folder works" test -s imp/manifest.json
echo '[1' >imp/manifest.json
"$SWEEP" import c1-n4.log --out imp --no-preview >o.txt 2>e.txt
check_eq "import into a folder whose manifest.json does not parse: exit 2" "$?" 2
check_eq "import: the broken manifest.json is not replaced" "$(cat imp/manifest.json)" "[1"
cp run/plots/tpot.gp tpot-before.gp
"$SWEEP" compare run empty --out run >o.txt 2>e.txt
check_eq "compare --out a run folder: exit 2" "$?" 2
check "compare --out a run folder: its charts untouched" cmp -s tpot-before.gp run/plots/tpot.gp
mkdir starting
: >starting/.sweep.lock
"$SWEEP" compare run empty --out starting >o.txt 2>e.txt
check_eq "compare --out a run that has only just started: exit 2" "$?" 2
check_eq "no process left" "$(procs_with "$T_TMP/srv.pid")" 0
finish
