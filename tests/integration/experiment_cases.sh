#!/bin/bash
# experiment_cases: every malformed experiment file in tests/cases/experiments/
# makes `sweep check` exit with the status on line 1 of NAME.expect and print
# exactly the one-line message on line 2 (on stderr; stdout stays empty).
# Inputs too big to commit (over 1 MiB, 10,000-deep nesting) are made here.
. tests/lib.sh
dir=tests/cases/experiments

# expect_check DESC FILE STATUS MESSAGE
expect_check() {
    timeout 60 "$SWEEP" check "$2" >"$T_TMP/out" 2>"$T_TMP/err" # 124: it hung
    rc=$?
    got=$(cat "$T_TMP/err")
    lines=$(wc -l <"$T_TMP/err")
    if [ "$rc" = "$3" ] && [ "$got" = "$4" ] && [ "$lines" -eq 1 ] && [ ! -s "$T_TMP/out" ]; then
        ok "$1"
    else
        fail "$1: want status $3 and '$4'; got status $rc, $lines stderr line(s) '$got'" \
            "and $(wc -c <"$T_TMP/out") bytes on stdout"
    fi
}

n=0
for f in "$dir"/*.yaml; do
    name=$(basename "$f" .yaml)
    if [ ! -f "$dir/$name.expect" ]; then
        fail "$name: no $name.expect"
        continue
    fi
    expect_check "$name" "$f" "$(sed -n 1p "$dir/$name.expect")" "$(sed -n 2p "$dir/$name.expect")"
    n=$((n + 1))
done
for e in "$dir"/*.expect; do
    [ -f "${e%.expect}.yaml" ] || fail "$(basename "$e"): no matching .yaml"
done
check "at least 30 committed cases ($n)" [ "$n" -ge 30 ]

# Over 1 MiB: refused before parsing, with the size and the limit.
head -c 1100000 /dev/zero | tr '\0' '#' >"$T_TMP/oversize.yaml"
expect_check "oversize (generated)" "$T_TMP/oversize.yaml" 2 \
    "$T_TMP/oversize.yaml: the file is 1100000 bytes; experiment files are limited to 1 MiB"

# 10,000 nested flow sequences: stopped at the 64th "[" (the top-level map is
# level 1 of 64), with no stack overflow.
{ printf 'x: '; head -c 10000 /dev/zero | tr '\0' '['; } >"$T_TMP/deep.yaml"
expect_check "10000-deep nesting (generated)" "$T_TMP/deep.yaml" 2 \
    "$T_TMP/deep.yaml:1:67: nesting deeper than 64 levels"

# W3-FIFO: a dataset path that is a FIFO is refused at once (before, check
# waited for a writer forever; expect_check's timeout makes that a failure).
mkfifo "$T_TMP/prompts.jsonl"
printf 'name: fifo\nserver: {model: models/m.gguf}\nbench:\n  grid: ["1:8"]\n  dataset: {kind: jsonl, path: %s}\n' \
    "$T_TMP/prompts.jsonl" >"$T_TMP/fifo.yaml"
expect_check "dataset path is a FIFO (generated)" "$T_TMP/fifo.yaml" 2 \
    "$T_TMP/fifo.yaml: variant 'default': bench.dataset: $T_TMP/prompts.jsonl: not a regular file (a FIFO, socket or device); give a file"

expect_check "missing file" "$T_TMP/nope.yaml" 2 \
    "$T_TMP/nope.yaml: cannot open the experiment file: No such file or directory"
expect_check "a folder" "$T_TMP" 2 "$T_TMP: is a directory, not an experiment file"
finish
