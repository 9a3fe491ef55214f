# run_owner.sh: what `sweep run` does to the folders it is given (issue 23,
# docs/reliability.md W3-M4, W3-N4, W3-N5, W3-N18). Writes into a run
# folder never follow a symlink (.sweep.lock, server.log); two runs started
# together into the default folder each get one; --out . --force refuses to
# move the experiment file or a program the run uses; a refused --out or
# --resume leaves the user's folder as it was (no .sweep.lock).
. tests/lib.sh
cd "$T_TMP" || exit 1

exp() { # FILE [KEY=VALUE...]
    local f=$1
    shift
    make_experiment fakeserver "$f" NAME=owner PIDFILE="$T_TMP/srv.pid" OUTPUT_LEN=4 \
        GRID='["1:2"]' "$@"
}
exp f.yaml

# ---- W3-M4: no write follows a symlink ----
echo secret >victim.txt
mkdir lk
ln -s ../victim.txt lk/.sweep.lock
"$SWEEP" run f.yaml --out lk >o.txt 2>e.txt
check_eq "a symlinked .sweep.lock: exit 3" "$?" 3
check "a symlinked .sweep.lock: said" grep -q "is a symbolic link" e.txt
check_eq "a symlinked .sweep.lock: its target untouched" "$(cat victim.txt)" secret
check "a symlinked .sweep.lock: still the link" test -L lk/.sweep.lock
# a folder holding only a lock link is not empty: --force moves the link aside
"$SWEEP" plot lk --no-preview >o.txt 2>e.txt
check_eq "plot into a folder with a lock link: exit 3" "$?" 3
check_eq "plot: the link's target untouched" "$(cat victim.txt)" secret
rm lk/.sweep.lock
ln -s ../victim.txt lk/.sweep.lock
exp f2.yaml GRID='["1:2", "2:2"]'
"$SWEEP" run f.yaml --out sl >o.txt 2>e.txt
check_eq "a first run: exit 0" "$?" 0
rm sl/default/server.log
ln -s ../../victim.txt sl/default/server.log
"$SWEEP" run f2.yaml --resume sl >o.txt 2>e.txt
check "a symlinked server.log: the run does not pass" test "$?" -ne 0
check_eq "a symlinked server.log: its target untouched" "$(cat victim.txt)" secret
check "a symlinked server.log: said" grep -q "server.log" e.txt

# ---- W3-N4: two runs into the default folder, started together ----
for i in 1 2 3 4 5 6; do
    "$SWEEP" run f.yaml >p1.txt 2>q1.txt &
    a=$!
    "$SWEEP" run f.yaml >p2.txt 2>q2.txt &
    b=$!
    track_pid "$a"
    track_pid "$b"
    wait "$a"
    ra=$?
    wait "$b"
    rb=$?
    check_eq "default folder, together ($i): both exit 0" "$ra $rb" "0 0"
    [ "$ra $rb" = "0 0" ] || cat q1.txt q2.txt
done
check_eq "default folder: twelve runs, twelve folders" \
    "$(find results/owner -mindepth 1 -maxdepth 1 -type d | wc -l)" 12

# ---- W3-N5: --force never moves what the run uses ----
mkdir -p proj/bin
cp "$MINICLIENT" proj/bin/client
(cd proj && make_experiment fakeserver p.yaml NAME=owner PIDFILE="$T_TMP/srv.pid" \
    OUTPUT_LEN=4 GRID='["1:2"]')
sed -i "s|\"$MINICLIENT\"|bin/client|" proj/p.yaml
echo old >proj/notes.txt
(cd proj && "$SWEEP" run p.yaml --out . --force) >o.txt 2>e.txt
check_eq "--out . --force with the experiment inside: exit 2" "$?" 2
check "--force: names what the run uses" grep -q "this run uses 'p.yaml'" e.txt
check "--force: the experiment stays" test -f proj/p.yaml
check "--force: nothing moved" test -f proj/notes.txt -a ! -e proj/previous-1
check "--force: no lock left" test ! -e proj/.sweep.lock
mkdir proj/out
cp proj/p.yaml proj/out/p.yaml
(cd proj && "$SWEEP" run out/p.yaml --out . --force) >o.txt 2>e.txt
check_eq "--force: a folder holding the experiment: exit 2" "$?" 2
check "--force: names the folder" grep -q "would move 'out'" e.txt
cp proj/p.yaml exp-p.yaml
sed -i "s|bin/client|$T_TMP/proj/bin/client|" exp-p.yaml
rm -r proj/out
(cd proj && "$SWEEP" run ../exp-p.yaml --out . --force) >o.txt 2>e.txt
check_eq "--force: a program with an absolute path inside: exit 2" "$?" 2
check "--force: names the program's folder" grep -q "would move 'bin'" e.txt
rm proj/bin/client
ln -s "$T_TMP" proj/lnk # a link to the folder of the experiment: moving it moves no file
(cd proj && "$SWEEP" run "$T_TMP/f.yaml" --out . --force) >o.txt 2>e.txt
check_eq "--force: nothing of the run inside: exit 0" "$?" 0
check "--force: moved the rest" test -f proj/previous-1/notes.txt
check "--force: the link moved, its target stays" test -L proj/previous-1/lnk -a -f f.yaml

# ---- W3-N18: a refused --out or --resume leaves no lock file ----
mkdir user
echo mine >user/notes.txt
"$SWEEP" run f.yaml --out user >o.txt 2>e.txt
check_eq "--out not empty: exit 2" "$?" 2
check "--out not empty: no .sweep.lock left" test ! -e user/.sweep.lock
check_eq "--out not empty: the folder as it was" "$(ls -A user | tr '\n' ' ')" "notes.txt "
make_experiment fakeserver other.yaml NAME=other PIDFILE="$T_TMP/srv.pid" OUTPUT_LEN=4 GRID='["1:2"]'
cp -r sl copied
rm -f copied/.sweep.lock
"$SWEEP" run other.yaml --resume copied >o.txt 2>e.txt
check_eq "--resume of another experiment: exit 2" "$?" 2
check "--resume refused: no .sweep.lock left" test ! -e copied/.sweep.lock
"$SWEEP" run f.yaml --out new/deep/run --only nosuch >o.txt 2>e.txt
check_eq "--only of no variant: exit 2" "$?" 2
check "a refused --out makes no folder" test ! -e new
rm -rf results
"$SWEEP" run f.yaml --only nosuch >o.txt 2>e.txt
check_eq "default folder, refused: exit 2" "$?" 2
check "default folder, refused: no results/ left" test ! -e results
finish
