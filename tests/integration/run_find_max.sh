# run_find_max.sh: bench.find_max on a server of known capacity. fakeserver
# with --max-batch 4, prefill 5 ms and steps of 10 ms (no per-stream cost)
# holds a slot for 5 + 10/2 + 9 x 10 = 100 ms per 10-token request, so it
# serves 4 / 0.1 s = 40 req/s; above that, constant arrivals queue without
# bound and TTFT passes the 100 ms target. The search (double from 5, then
# 3 bisections) must end within one bisection step of 40 req/s, each probe
# a row; a resumed run repeats no probe.
. tests/lib.sh
cd "$T_TMP" || exit 1

write_exp() { # FILE EXTRA_BENCH ANALYSIS
    cat >"$1" <<YAML
name: fm
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"]
  flags: {step-a-ms: 10, step-b-ms: 0, prefill-ms: 5, max-batch: 4}
  ready: {path: /health, timeout_s: 30}
bench:
  warmup: 0
  output_len: 10
  rate_kind: constant
  rates: [5]
  prompts: 16
  find_max: {start: 5, max: 1000, steps: 3, probe_s: 2}
$2
analysis:
$3
YAML
}

write_exp fm.yaml "" "  slo: {ttft_ms: 100}"
"$SWEEP" run fm.yaml --out run-fm >out.txt 2>err.txt
rc=$?
grep find_max err.txt
check_eq "find_max: exit 0" "$rc" 0
line=$(grep "find_max: the highest rate meeting the targets is" err.txt)
lo=$(echo "$line" | sed -n 's/.* is \([0-9.]*\) req\/s (\([0-9.]*\) req\/s missed them)$/\1/p')
hi=$(echo "$line" | sed -n 's/.* is \([0-9.]*\) req\/s (\([0-9.]*\) req\/s missed them)$/\2/p')
check "find_max: a result line ($lo, $hi)" test -n "$lo" -a -n "$hi"
step=$(awk -v a="$lo" -v b="$hi" 'BEGIN { print b - a }')
check "find_max: $lo req/s is within one step ($step) of the capacity, 40 req/s" within "$lo" 40 "$step"
probes=$(grep -c "find_max: [0-9.]* req/s \(meets\|misses\)" err.txt)
check_eq "find_max: every probe is a row (the grid's 5 req/s point reused)" "$(rows run-fm)" "$probes"
check "find_max: probes are rate rows" grep -q "rate80-n160.log" run-fm/points.csv
# issue 14: probes are not points of the total: "probe K (find_max, at most
# 12)" (5, 10, ..., 640, 1000 doubling, then 3 bisections), K never above
# it, the point counter never past its total, the ETA a lower bound
check_eq "progress: the grid's point is point 1/1, the only point line" \
    "$(grep -c '^sweep: point [0-9]*/[0-9]*: ' err.txt)" 2
check "progress: no point counter past its total" \
    awk -F'[ /:]' '/^sweep: point [0-9]+\/[0-9]+:/ && $3 + 0 > $4 + 0 { bad = 1 } END { exit bad }' err.txt
check_eq "progress: a start and an end line per probe run" \
    "$(grep -c '^sweep: probe [0-9]* (find_max, at most 12): default find_max rate=' err.txt)" \
    "$((2 * (probes - 1)))"
check "progress: no probe past the bound" \
    awk '/^sweep: probe [0-9]+ \(find_max, at most 12\)/ && $3 + 0 > 12 { bad = 1 } END { exit bad }' err.txt
check "progress: the ETA while searching is a lower bound" \
    grep -q '^sweep: point 1/1: .* ok in .* (ETA >= ' err.txt

check_eq "charts against the offered rate: one point per probe" \
    "$(grep -c '^[0-9]' run-fm/plots/ttft-vs-rate.dat)" "$probes"
check "a goodput chart against the offered rate" test -s run-fm/plots/goodput-vs-rate.dat
check "rate points stay off the concurrency charts" test ! -e run-fm/plots/ttft.dat

"$SWEEP" run fm.yaml --resume run-fm >out.txt 2>err2.txt
check_eq "resumed: exit 0" "$?" 0
check "resumed: no probe runs again" grep -q "^sweep: 0 ok, 0 failed this session" out.txt
check_eq "resumed: the same result" "$(grep "find_max: the highest" err2.txt)" "$line"

write_exp noslo.yaml "" "  fit: {x: concurrency}"
"$SWEEP" check noslo.yaml >out.txt 2>err.txt
check_eq "find_max without a target: exit 2" "$?" 2
check "find_max without a target: says so" grep -q "bench.find_max needs a target in analysis.slo" err.txt
finish
