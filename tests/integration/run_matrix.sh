# run_matrix.sh: a flag matrix end to end on fakeserver. matrix:
# {flags.max-batch: [1, 4], bench.output_len: [4, 8]} makes four variants
# named max-batch=1,output_len=4 ... with their own folders and rows; the
# server of each gets its flag; --resume after all are ok runs nothing (each
# point is found by its key); the saved experiment.yaml lists the variants;
# `sweep compare RUN --by AXIS` compares along one axis, a group per value
# of the others; analysis.group_by and `sweep plot --by AXIS` group the
# run's own charts by one axis.
. tests/lib.sh
cd "$T_TMP" || exit 1

cat >mx.yaml <<YAML
name: mx
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}", --print-argv]
  flags: {step-a-ms: 2, step-b-ms: 0, prefill-ms: 1}
  ready: {path: /health, timeout_s: 30}
bench:
  warmup: 0
  grid: ["2:4"]
matrix:
  flags.max-batch: [1, 4]
  bench.output_len: [4, 8]
analysis:
  group_by: bench.output_len
YAML
"$SWEEP" run mx.yaml --out run-mx >out.txt 2>err.txt
rc=$?
cat err.txt
check_eq "matrix: exit 0" "$rc" 0
check_eq "matrix: four rows, one per variant" "$(col run-mx variant | tr '\n' ' ')" \
    "max-batch=1,output_len=4 max-batch=1,output_len=8 max-batch=4,output_len=4 max-batch=4,output_len=8 "
check_eq "matrix: all ok" "$(col run-mx status | tr '\n' ' ')" "ok ok ok ok "
check_eq "matrix: output_len per variant" "$(col run-mx total_output_tokens | tr '\n' ' ')" "16 32 16 32 "
for b in 1 4; do
    got=$(grep -A1 -x 'argv\[[0-9]*\]=--max-batch' "run-mx/max-batch=$b,output_len=8/server.log" | sed -n '2s/^argv\[[0-9]*\]=//p')
    check_eq "matrix: the server of max-batch=$b got --max-batch $b" "$got" "$b"
done
check "matrix: each variant has its folder" test -s "run-mx/max-batch=4,output_len=8/c2-n4.log"
check "matrix: experiment.yaml lists the variants" grep -q "name: \"\?max-batch=4,output_len=8" run-mx/experiment.yaml
# analysis.group_by: the run's charts give each output_len a colour (lc)
# and each max-batch a marker (pt), series grouped by output_len
series() { grep '^# index' "$1" | sed 's/^# index [0-9]*: //' | tr '\n' ';'; }
styles() { grep -o 'lc [0-9]* pt [0-9]*' "$1" | tr '\n' ';'; }
for chart in throughput tpot; do
    check_eq "group_by: $chart series by output_len" "$(series run-mx/plots/$chart.dat)" \
        "output_len=4 (max-batch=1);output_len=4 (max-batch=4);output_len=8 (max-batch=1);output_len=8 (max-batch=4);"
    check_eq "group_by: $chart colour per output_len, marker per max-batch" \
        "$(styles run-mx/plots/$chart.gp)" "lc 1 pt 7;lc 1 pt 5;lc 2 pt 7;lc 2 pt 5;"
done
check "group_by: the chart says so" grep -q 'set title ".*, by output_len"' run-mx/plots/throughput.gp
check "group_by: REPORT.md says so" grep -q 'grouped by `output_len`' run-mx/REPORT.md
# sweep plot --by: this plot only, by the other axis
"$SWEEP" plot run-mx --by flags.max-batch --no-preview >out.txt 2>err.txt
check_eq "plot --by: exit 0" "$?" 0
check_eq "plot --by: throughput series by max-batch" "$(series run-mx/plots/throughput.dat)" \
    "max-batch=1 (output_len=4);max-batch=1 (output_len=8);max-batch=4 (output_len=4);max-batch=4 (output_len=8);"
check_eq "plot --by: colour per max-batch, marker per output_len" \
    "$(styles run-mx/plots/tpot.gp)" "lc 1 pt 7;lc 1 pt 5;lc 2 pt 7;lc 2 pt 5;"
check "plot --by: REPORT.md says so" grep -q 'grouped by `max-batch`' run-mx/REPORT.md
rm -f run-mx/points.csv.bak
"$SWEEP" plot run-mx --by quant >out.txt 2>err.txt
check_eq "plot --by an axis the run lacks: exit 2" "$?" 2
check "plot --by an axis the run lacks: says so" grep -q -e "--by 'quant': no variant of 'run-mx' is named quant=VALUE" err.txt
check "plot --by an axis the run lacks: nothing rewritten" test ! -e run-mx/points.csv.bak
"$SWEEP" run mx.yaml --resume run-mx >out.txt 2>err.txt
check_eq "matrix resumed: exit 0" "$?" 0
check "matrix resumed: nothing runs again" grep -q "^sweep: 0 ok, 0 failed this session (4 already ok)" out.txt
"$SWEEP" check mx.yaml --only "max-batch=4,output_len=8" >out.txt 2>err.txt
check_eq "matrix: --only takes a generated name" "$(grep -c "^variant '" out.txt)" 1
"$SWEEP" compare run-mx --by max-batch --out cmp >out.txt 2>err.txt
check_eq "compare --by: exit 0" "$?" 0
check_eq "compare --by: one comparison per value of the other axis" \
    "$(grep '^== ' out.txt | tr '\n' ' ')" \
    "== output_len=4 along max-batch (2 variants) == output_len=8 along max-batch (2 variants) "
check "compare --by: max-batch=1 is the baseline" grep -q "baseline A = run-mx:max-batch=1,output_len=4;" out.txt
check "compare --by: a compare.md per group" test -s cmp/output_len=4/compare.md -a -s cmp/output_len=8/compare.md
"$SWEEP" compare run-mx --by quant >out.txt 2>err.txt
check_eq "compare --by an axis the run lacks: exit 2" "$?" 2
check "compare --by an axis the run lacks: says so" grep -q "no two variants of 'run-mx' differ only in quant" err.txt
"$SWEEP" compare run-mx run-mx --by max-batch >out.txt 2>err.txt
check_eq "compare --by with two runs: exit 2" "$?" 2
finish
