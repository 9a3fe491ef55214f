# fp4_help: `fp4serve --help` and engine/README.md list every exit status
# of enum fp_err, read from engine/fp4.h itself so that the list cannot
# drift from the code.
. tests/lib.sh

"$FP4SERVE" --help >"$T_TMP/help"
check_eq "--help exits 0" "$?" "0"
# "    FP_ERR_USAGE = 2,  /* ... */" -> "FP_ERR_USAGE 2"
sed -n '/^enum fp_err {/,/^};/p' "$TOPDIR/engine/fp4.h" |
    sed -n 's/^ *\(FP_[A-Z_]*\) *= *\([0-9]*\).*/\1 \2/p' >"$T_TMP/codes"
check "fp4.h: enum fp_err read ($(wc -l <"$T_TMP/codes") values)" [ "$(wc -l <"$T_TMP/codes")" -ge 9 ]
while read -r name code; do
    check "--help lists $name ($code)" grep -Eq "^ +$code  [^ ]" "$T_TMP/help"
    check "engine/README.md lists $name ($code)" grep -q "^| $code | \`$name\` |" "$TOPDIR/engine/README.md"
done <"$T_TMP/codes"
check_eq "--help lists no other status" \
    "$(sed -n '/^exit status:/,$p' "$T_TMP/help" | grep -cE '^ +[0-9]+  ')" "$(wc -l <"$T_TMP/codes")"

# W3-N15: output that cannot be written is an I/O error (3) with a message,
# never a silent 0, on every command that prints to stdout
model="$T_TMP/tiny.gguf"
"$FP4SERVE" synth --preset tiny --seed 1 -o "$model" >/dev/null 2>&1
for args in "version" "--version" "--help" "serve --help" "info $model" \
    "generate --model $model --prompt hi -n 2"; do
    # shellcheck disable=SC2086 # word splitting of args is meant
    "$FP4SERVE" $args >/dev/full 2>"$T_TMP/full.err"
    check_eq "fp4serve $args > /dev/full: exit 3" "$?" "3"
    check "fp4serve $args > /dev/full: says so" \
        grep -q 'output to stdout could not be written: No space left on device' "$T_TMP/full.err"
done
finish
