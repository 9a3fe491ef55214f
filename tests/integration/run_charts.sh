# run_charts.sh: a chart is the new one, whole, or none, and every chart
# that could not be drawn is named (issue 23, docs/reliability.md W3-M1,
# W3-N16). On a filesystem that fills up while gnuplot writes (a small
# tmpfs; needs root and mount, else that part is skipped) `sweep plot`
# leaves no cut PNG, no empty SVG and no scratch folder, exits 3 and names
# each missing chart; a gnuplot that fails names its script, never "(null)".
. tests/lib.sh
cd "$T_TMP" || exit 1

make_experiment fakeserver f.yaml NAME=charts PIDFILE="$T_TMP/srv.pid" OUTPUT_LEN=4 \
    GRID='["1:2", "2:2", "4:4"]'
"$SWEEP" run f.yaml --out run >o.txt 2>e.txt
check_eq "a run: exit 0" "$?" 0
charts=$(cd run/plots && ls *.gp | sed 's/\.gp$//' | tr '\n' ' ')
check "a run: four charts or more" test "$(echo $charts | wc -w)" -ge 4

# whole_images DIR: every PNG ends with its IEND chunk, every SVG with </svg>
whole_images() {
    for f in "$1"/*.png; do
        [ -e "$f" ] || continue
        [ "$(tail -c 12 "$f" | od -An -tx1 | tr -d ' \n')" = 0000000049454e44ae426082 ] ||
            { echo "cut PNG: $f"; return 1; }
    done
    for f in "$1"/*.svg; do
        [ -e "$f" ] || continue
        tail -c 16 "$f" | grep -q '</svg>' || { echo "cut SVG: $f"; return 1; }
    done
}
check "a run: the images are whole" whole_images run/plots

# ---- W3-N16: a gnuplot that fails is named with its script ----
cat >badgnuplot <<'SH'
#!/bin/sh
echo "cannot open output file: Permission denied" >&2
exit 1
SH
chmod +x badgnuplot
SWEEP_GNUPLOT="$T_TMP/badgnuplot" "$SWEEP" plot run --no-preview >o.txt 2>e.txt
check_eq "gnuplot fails: plot exit 3" "$?" 3
check "gnuplot fails: no (null) in the message" sh -c "! grep -q '(null)' e.txt"
check "gnuplot fails: names the script" grep -q "run/plots/tpot.gp failed (exit 1)" e.txt
check "gnuplot fails: names every chart" sh -c \
    "for c in $charts; do grep -q \"charts not drawn (.*\$c\" e.txt || exit 1; done"
check "gnuplot fails: no old image left under the new data" sh -c "! ls run/plots/*.png 2>/dev/null"
check "gnuplot fails: REPORT.md names the missing charts" grep -q "charts not drawn (throughput" \
    run/REPORT.md
check "gnuplot fails: no scratch folder left" sh -c "! ls -d run/plots/.render-* 2>/dev/null"
"$SWEEP" plot run --no-preview >o.txt 2>e.txt
check_eq "gnuplot back: plot exit 0" "$?" 0
check "gnuplot back: the images are whole" whole_images run/plots

# ---- W3-M1: a disk that fills while the charts are written ----
mkdir full
if mount -t tmpfs -o size=1m tmpfs full 2>/dev/null; then
    trap 'umount "$T_TMP/full" 2>/dev/null; t_cleanup' EXIT
    mkdir full/run
    (cd run && tar cf - --exclude=./plots .) | (cd full/run && tar xf -)
    free_kb=$(df -k full | awk 'NR == 2 { print $4 }')
    # room for the data, the scripts and REPORT.md and about one chart
    dd if=/dev/zero of=full/filler bs=4k count=$(((free_kb - 96) / 4)) 2>/dev/null
    "$SWEEP" plot full/run --no-preview >o.txt 2>e.txt
    check_eq "full filesystem: plot exit 3" "$?" 3
    check "full filesystem: no cut PNG or SVG" whole_images full/run/plots
    check "full filesystem: no empty image" sh -c "! find full/run/plots -name '*.png' -size 0 -o -name '*.svg' -size 0 | grep -q ."
    check "full filesystem: no scratch folder left" sh -c "! ls -d full/run/plots/.render-* 2>/dev/null"
    missing=""
    for c in $charts; do
        [ -s "full/run/plots/$c.png" ] && [ -s "full/run/plots/$c.svg" ] || missing="$missing $c"
    done
    check "full filesystem: some chart is missing" test -n "$missing"
    for c in $missing; do
        check "full filesystem: the missing chart '$c' is named" grep -q "charts not drawn (.*$c" e.txt
    done
    check "full filesystem: says how many" grep -q "of [0-9]* charts not drawn" e.txt
    umount full
    trap t_cleanup EXIT
else
    echo "skipped: full filesystem (cannot mount a tmpfs here)"
fi
finish
