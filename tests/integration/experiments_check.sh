#!/bin/bash
# experiments_check: every example in experiments/ passes `sweep check`
# (exit 0, a plan with points), and the schema section of README.md is
# exactly what `sweep check --schema` prints, so the docs cannot drift.
. tests/lib.sh

n=0
for f in experiments/*.yaml; do
    [ -f "$f" ] || continue
    n=$((n + 1))
    "$SWEEP" check "$f" >"$T_TMP/plan" 2>"$T_TMP/err"
    rc=$?
    if [ "$rc" -eq 0 ] && grep -qE '^[0-9]+ points? in [0-9]+ variants?$' "$T_TMP/plan"; then
        ok "sweep check $f"
    else
        fail "sweep check $f: exit $rc: $(head -n 3 "$T_TMP/err")"
    fi
    # a warning may only be about a model that is not on this machine
    if grep -v "model path" "$T_TMP/err" | grep -q .; then
        fail "sweep check $f: unexpected stderr: $(head -n 3 "$T_TMP/err")"
    fi
done
check "experiments/ has examples ($n)" [ "$n" -ge 3 ]

# --only narrows the plan; an unknown variant is a usage error.
"$SWEEP" check experiments/vllm.yaml --only prefix-cache >"$T_TMP/plan" 2>/dev/null
check_eq "--only keeps one variant" "$(grep -c "^variant '" "$T_TMP/plan")" 1
"$SWEEP" check experiments/vllm.yaml --only nope >/dev/null 2>"$T_TMP/err"
check_eq "--only with an unknown variant exits 2" "$?" 2
check_eq "--only names the variants" "$(cat "$T_TMP/err")" \
    "experiments/vllm.yaml: --only: no variant 'nope' (variants: prefix-cache, no-prefix-cache)"

# The README schema block equals `sweep check --schema`.
"$SWEEP" check --schema >"$T_TMP/schema"
check_eq "sweep check --schema exits 0" "$?" 0
sed -n '/^<!-- schema:begin -->$/,/^<!-- schema:end -->$/p' README.md | sed '1d;$d' >"$T_TMP/readme"
if [ -s "$T_TMP/readme" ] && cmp -s "$T_TMP/schema" "$T_TMP/readme"; then
    ok "README schema block matches sweep check --schema"
else
    fail "README schema block differs from sweep check --schema (regenerate it):"
    diff "$T_TMP/readme" "$T_TMP/schema" | head -n 10
fi

"$SWEEP" check --help >"$T_TMP/help"
check "sweep check --help lists its options" grep -q -- "--schema" "$T_TMP/help"
"$SWEEP" check >/dev/null 2>"$T_TMP/err"
check_eq "sweep check without a file exits 2" "$?" 2
"$SWEEP" check --bogus x.yaml >/dev/null 2>"$T_TMP/err"
check_eq "unknown option exits 2" "$?" 2
finish
