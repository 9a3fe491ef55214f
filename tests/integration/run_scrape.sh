# run_scrape.sh: the server's /metrics around each point (issue 23,
# docs/reliability.md W3-N9, W3-SCRAPE-DISK). One failed scrape costs only
# that point's server_* columns: the next points are scraped again; three
# failures in a row stop the asking. A scrape that cannot be saved (a full
# disk, on a small tmpfs: needs root and mount, else skipped) is said as a
# write error and exits 3, never as "no server metrics" (the server's fault).
. tests/lib.sh
cd "$T_TMP" || exit 1

exp() { # FILE [KEY=VALUE...]
    local f=$1
    shift
    make_experiment fakeserver "$f" NAME=scrape PIDFILE="$T_TMP/srv.pid" OUTPUT_LEN=4 "$@"
}

# ---- W3-N9: one failed scrape, the later ones work ----
exp once.yaml GRID='["1:2", "2:2", "4:2"]' SERVER_ARGS=', --metrics-fail, "2"'
"$SWEEP" run once.yaml --out once >o.txt 2>e.txt
check_eq "a failed scrape: the run exits 0" "$?" 0
check_eq "a failed scrape: said once" "$(grep -c 'no server metrics at .*/metrics (HTTP 500)' e.txt)" 1
check_eq "a failed scrape: that point has no server columns" "$(col once server_step_ms 1)" ""
check "a failed scrape: the next point has them" test -n "$(col once server_step_ms 2)"
check "a failed scrape: the last point has them" test -n "$(col once server_step_ms 3)"
exp never.yaml GRID='["1:2", "2:2", "4:2"]' SERVER_ARGS=', --no-metrics'
"$SWEEP" run never.yaml --out never >o.txt 2>e.txt
check_eq "no /metrics at all: exit 0" "$?" 0
check_eq "no /metrics at all: said once" "$(grep -c 'no server metrics at' e.txt)" 1
check_eq "no /metrics at all: asking stops after three" \
    "$(grep -c 'failed 3 times in a row: not asked again' e.txt)" 1

# ---- W3-SCRAPE-DISK: a scrape that cannot be saved blames the disk ----
mkdir full
if mount -t tmpfs -o size=1536k tmpfs full 2>/dev/null; then
    trap 'umount "$T_TMP/full" 2>/dev/null; t_cleanup' EXIT
    exp big.yaml GRID='["1:2"]' SERVER_ARGS=', --metrics-pad, "1000000"'
    "$SWEEP" run big.yaml --out full/run >o.txt 2>e.txt
    check_eq "a scrape on a full disk: exit 3" "$?" 3
    check "a scrape on a full disk: said as a write error" \
        grep -q "cannot save the server metrics: .*No space left on device" e.txt
    check "a scrape on a full disk: the server is not blamed" \
        sh -c "! grep -q 'no server metrics' e.txt"
    check_eq "a scrape on a full disk: the point itself is kept" "$(col full/run status)" ok
    umount full
    trap t_cleanup EXIT
else
    echo "skipped: full filesystem (cannot mount a tmpfs here)"
fi
finish
