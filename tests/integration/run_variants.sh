# run_variants.sh: two variants (fast and slow decode steps) each get their
# own server, folder and rows; --only runs one of them; a rerun of an
# already-complete run folder with --resume starts nothing, and neither does
# one after a variant was renamed (its rows take the new name).
. tests/lib.sh
cd "$T_TMP" || exit 1

make_experiment fakeserver v.yaml NAME=variants PIDFILE="$T_TMP/\${variant}.pid" STEP_A=4 PREFILL=2 \
    OUTPUT_LEN=16 GRID='["1:2", "4:4"]' EXTRA="variants:
  - {name: fast}
  - {name: slow, server: {flags: {step-a-ms: 12}}}"

"$SWEEP" run v.yaml --only slow --out run >out.txt 2>err.txt
check_eq "--only slow: exit 0" "$?" 0
check_eq "--only slow: 2 rows, all of variant slow" "$(col run variant | tr '\n' ' ')" "slow slow "
check "--only slow: the fast server never started" test ! -e fast.pid
check "--only: the resume hint would keep --only (manifest argv)" grep -q '"--only"' run/manifest.json

"$SWEEP" run v.yaml --resume run >out.txt 2>err.txt
check_eq "resume with both: exit 0" "$?" 0
check_eq "resume with both: 4 rows" "$(rows run)" 4
check "resume with both: fast ran now" test -s fast.pid -a -s run/fast/c1-n2.log
check "resume with both: slow was not rerun" test ! -e run/slow/c1-n2.log.1
check_eq "each variant has its server.log" "$(ls run/fast/server.log run/slow/server.log | wc -l)" 2
fast=$(col run median_tpot_ms 3)
slow=$(col run median_tpot_ms 1)
check "slow steps show up in the numbers (slow $slow ms > fast $fast ms)" awk -v s="$slow" -v f="$fast" 'BEGIN { exit !(s > f + 5) }'

rm -f fast.pid slow.pid
"$SWEEP" run v.yaml --resume run >out.txt 2>err.txt
check_eq "complete run resumed: exit 0" "$?" 0
check "complete run resumed: no server started" test ! -e fast.pid -a ! -e slow.pid
check "complete run resumed: says so" grep -q "4 of 4 points already ok" err.txt
# a variant renamed (builtin client, whose --jsonl path names the variant)
cat >r.yaml <<YAML
name: rename
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"]
  flags: {step-a-ms: 4, step-b-ms: 1, prefill-ms: 2}
bench: {input_len: 8, output_len: 8, warmup: 0, grid: ["1:2", "2:2"]}
variants:
  - {name: p}
  - {name: q, server: {flags: {step-a-ms: 6}}}
YAML
"$SWEEP" run r.yaml --out rrun >out.txt 2>err.txt
check_eq "rename: first run exit 0" "$?" 0
sed 's/name: q,/name: q2,/' r.yaml >r2.yaml
"$SWEEP" run r2.yaml --resume rrun >out.txt 2>err.txt
check_eq "variant renamed, resumed: exit 0" "$?" 0
check "variant renamed, resumed: no server started" test ! -e rrun/q2/server.log
check "variant renamed, resumed: says so" grep -q "2 ok row(s) of renamed variants" err.txt
check_eq "variant renamed, resumed: its rows carry the new name" \
    "$(col rrun variant | tr '\n' ' ')" "p p q2 q2 "
check_eq "no process left" "$(procs_with "$T_TMP/")" 0
finish
