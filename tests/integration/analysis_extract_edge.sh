# analysis_extract_edge.sh: logs that lie or are huge (issue 12). A log
# over 64 MiB is streamed (bounded memory) by `sweep extract`, `import` and
# `plot`; one log that cannot be read fails its own point only (exit 3, the
# others go on); a metric twice in one block and a block cut short are
# errors naming the lines (an imported one is still its point, failed);
# warm-up blocks are noted in the point's cause; '\r' progress bars do not
# hide rows; a --pattern that matches a non-number quotes it; hex numbers
# are refused in logs and in points.csv.
. tests/lib.sh

fix=tests/fixtures/logs
filler() { yes 'progress 12% [####      ] 6/48 tokens: 0.5' | head -c $((65 * 1024 * 1024)); }

# ---- sweep extract ----
{ filler; cat $fix/sglang_newest.log; } >"$T_TMP/big.log"
"$SWEEP" extract "$T_TMP/big.log" >"$T_TMP/big.json" 2>"$T_TMP/big.err"
check_eq "extract: a 65 MiB log is read (exit 0)" "$?" 0
check "its block's values" grep -q '"median_tpot_ms": 62.75,' "$T_TMP/big.json"
if [ -x /usr/bin/time ]; then # GNU time: peak resident memory in KiB
    /usr/bin/time -f '%M' -o "$T_TMP/rss" "$SWEEP" extract "$T_TMP/big.log" >/dev/null 2>&1
    rss=$(tail -n 1 "$T_TMP/rss")
    check "extract streams: peak memory $rss KiB is under 32 MiB" test "$rss" -lt 32768
fi

"$SWEEP" extract "$T_TMP/nope.log" $fix/sglang_duplicate_row.log $fix/sglang_newest.log \
    $fix/sglang_cut_short.log >"$T_TMP/x.json" 2>"$T_TMP/x.err"
check_eq "extract: one unreadable log among good ones: exit 3" "$?" 3
check "the good log is still printed" grep -q '"median_tpot_ms": 62.75,' "$T_TMP/x.json"
check "the bad ones print null" test "$(grep -c ': null' "$T_TMP/x.json")" -eq 3
check "a row twice in one block names both lines" grep -q \
    "sglang_duplicate_row.log: 'median_tpot_ms' is printed twice in the result block opened at line 5: lines 29 and 31" \
    "$T_TMP/x.err"
check "a block cut short names its line" grep -q \
    "sglang_cut_short.log: the result block opened at line 14 is not closed" "$T_TMP/x.err"
"$SWEEP" extract $fix/sglang_duplicate_row.log >/dev/null 2>&1
check_eq "extract: a log that cannot be trusted: exit 1" "$?" 1

"$SWEEP" extract $fix/sglang_progress_cr.log >"$T_TMP/cr.json" 2>&1
check "a row after a '\\r' progress bar is read" grep -q '"median_tpot_ms": 71,' "$T_TMP/cr.json"
"$SWEEP" extract $fix/sglang_warmup_blocks.log >"$T_TMP/w.json" 2>"$T_TMP/w.err"
check "warm-up block then the real one: the last is used" grep -q '"median_tpot_ms": 71,' "$T_TMP/w.json"
check "and said" grep -q "sglang_warmup_blocks.log: 2 result blocks, last used (line 16)" "$T_TMP/w.err"
"$SWEEP" extract $fix/sglang_odd_numbers.log --require median_tpot_ms >"$T_TMP/odd.json" 2>"$T_TMP/odd.err"
check_eq "extract: a hex value is no number: exit 1" "$?" 1
check "0x1p3 is not read as 8" sh -c "! grep -q '\"median_tpot_ms\"' '$T_TMP/odd.json'"
check "the value is quoted" grep -q \
    "missing required metric 'median_tpot_ms': matched '0x1p3', not a number (line 29)" "$T_TMP/odd.err"
printf 'Goodput: abc\nGoodput (req/s): n/a\n' >"$T_TMP/goodput.log"
"$SWEEP" extract "$T_TMP/goodput.log" --pattern 'goodput=^Goodput: (.*)$' --require goodput \
    >/dev/null 2>"$T_TMP/gp.err"
check_eq "extract: a --pattern that matches a non-number: exit 1" "$?" 1
check "says what it matched" grep -q \
    "missing required metric 'goodput': matched 'abc', not a number (line 1)" "$T_TMP/gp.err"

# ---- sweep import: a big log, a missing one, a warm-up block ----
mkdir "$T_TMP/logs"
cp $fix/scaling-a/sweep_c1-n8.log "$T_TMP/logs/"
{ filler; cat $fix/scaling-a/sweep_8_24.log; } >"$T_TMP/logs/sweep_8_24.log"
{ cat "$fix/scaling-a/sweep_16:48.log"; cat "$fix/scaling-a/sweep_16:48.log"; } >"$T_TMP/logs/sweep_16:48.log"
run="$T_TMP/run"
"$SWEEP" import "$T_TMP/logs/sweep_c1-n8.log" "$T_TMP/logs/sweep_8_24.log" \
    "$T_TMP/logs/sweep_c99-n9.log" "$T_TMP/logs/sweep_16:48.log" --out "$run" --no-preview \
    >"$T_TMP/imp.out" 2>"$T_TMP/imp.err"
check_eq "import: a missing log is left out, the others imported: exit 3" "$?" 3
check "it is named" grep -q "sweep_c99-n9.log: No such file or directory" "$T_TMP/imp.err"
check "the summary says so" grep -q "imported 3 log(s) into .* (3 ok, 0 failed); 1 log(s) left out" "$T_TMP/imp.out"
check_eq "three points" "$(grep -c '^default,' "$run/points.csv")" 3
check "the 65 MiB log is copied whole" cmp -s "$T_TMP/logs/sweep_8_24.log" "$run/default/c8-n24.log"
check "and its point is ok" grep -q '^default,8,24,1,ok,' "$run/points.csv"
check "a log with two blocks says so in its point's cause" \
    grep -q '^default,16,48,1,ok,.*2 result blocks, last used (line 42)' "$run/points.csv"

# logs that cannot be trusted still become their points: failed, saying why
mkdir "$T_TMP/bad"
cp $fix/sglang_cut_short.log "$T_TMP/bad/cut_c1-n8.log"
cp $fix/sglang_duplicate_row.log "$T_TMP/bad/dup_c1-n8.log"
"$SWEEP" import "$T_TMP/bad" --out "$T_TMP/badrun" --no-preview >/dev/null 2>"$T_TMP/bad.err"
check_eq "import: logs that cannot be trusted are failed points: exit 1" "$?" 1
check "a block cut short: failed, naming its line" grep -q \
    "^default,1,8,1,failed,,the result block opened at line 14 is not closed" "$T_TMP/badrun/points.csv"
check "a row twice: failed, naming both lines" grep -q \
    "^default,1,8,2,failed,,'median_tpot_ms' is printed twice in the result block opened at line 5: lines 29 and 31" \
    "$T_TMP/badrun/points.csv"

# ---- sweep plot: one log that cannot be read fails its own point ----
rm "$run/default/c1-n8.log"
mkdir "$run/default/c1-n8.log" # a folder where the log should be: cannot be read
"$SWEEP" plot "$run" --no-preview >"$T_TMP/plot.out" 2>"$T_TMP/plot.err"
check_eq "plot: an unreadable log: exit 3, the run is still rebuilt" "$?" 3
check "it is named" grep -q "c1-n8.log: is a directory" "$T_TMP/plot.err"
check "its point is failed, saying why" \
    grep -q '^default,1,8,1,failed,.*cannot read the log: .*c1-n8.log: is a directory' "$run/points.csv"
check "the others are still ok" sh -c "grep -q '^default,8,24,1,ok,' '$run/points.csv' && grep -q '^default,16,48,1,ok,' '$run/points.csv'"
check "REPORT.md and fit.json rewritten" sh -c "test -s '$run/REPORT.md' && test -s '$run/fit.json'"
rmdir "$run/default/c1-n8.log"
cp $fix/scaling-a/sweep_c1-n8.log "$run/default/c1-n8.log"
"$SWEEP" plot "$run" --no-preview >/dev/null 2>&1
check_eq "plot: the log is back: exit 0" "$?" 0
check "and its point ok again" grep -q '^default,1,8,1,ok,' "$run/points.csv"

# ---- numbers in points.csv are decimal only ----
awk -F, -v OFS=, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "median_tpot_ms") c = i }
    NR == 2 { $c = "0x1p3" } { print }' "$run/points.csv" >"$T_TMP/p.csv" && mv "$T_TMP/p.csv" "$run/points.csv"
make_experiment offline "$T_TMP/exp.yaml" NAME=estimate GRID='["1:8", "16:48"]'
"$SWEEP" check "$T_TMP/exp.yaml" --from "$run" >/dev/null 2>"$T_TMP/hex.err"
check_eq "check --from: a hex number in points.csv is refused (exit 2)" "$?" 2
check "naming the cell" grep -q "points.csv:2: median_tpot_ms '0x1p3' is not a number" "$T_TMP/hex.err"
rm -f "$T_TMP/big.log" "$T_TMP/logs/sweep_8_24.log"
finish
