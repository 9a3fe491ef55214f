# gguf_corrupt: every file of the corrupt-GGUF corpus (tests/cases/gguf)
# makes `fp4serve info` print exactly its one-line error on stderr, nothing
# on stdout, and exit with its status (tests/cases/gguf/cases.tsv); the
# valid base file prints its summary and exits 0.
. tests/lib.sh

dir=tests/cases/gguf
n=0
while IFS="$(printf '\t')" read -r name status msg; do
    case "$name" in '#'* | '') continue ;; esac
    n=$((n + 1))
    f="$dir/$name.gguf"
    "$FP4SERVE" info "$f" >"$T_TMP/out" 2>"$T_TMP/err"
    rc=$?
    check_eq "$name: exit status" "$rc" "$status"
    if [ "$status" -eq 0 ]; then
        check "$name: summary printed" grep -q '^architecture  llama$' "$T_TMP/out"
        check_eq "$name: no stderr" "$(cat "$T_TMP/err")" ""
    else
        check_eq "$name: message" "$(cat "$T_TMP/err")" "fp4serve: error: $f: $msg"
        check_eq "$name: one line" "$(wc -l <"$T_TMP/err" | tr -d ' ')" "1"
        check_eq "$name: no stdout" "$(wc -c <"$T_TMP/out" | tr -d ' ')" "0"
    fi
done <"$dir/cases.tsv"
check "at least 12 corrupt cases" [ "$n" -ge 13 ]
# A type the engine does not compute with parses, and info says so.
"$FP4SERVE" info "$dir/iq2_xxs_tensor.gguf" >"$T_TMP/out" 2>&1
check "iq2_xxs: listed as not computed" \
    grep -qE '^iq2_xxs +1 +256 +66 .*\(fp4serve does not compute with this type\)$' "$T_TMP/out"
# Every .gguf in the folder has an expectation, so none is skipped silently.
for f in "$dir"/*.gguf; do
    check "$(basename "$f") listed in cases.tsv" grep -q "^$(basename "$f" .gguf)	" "$dir/cases.tsv"
done
# I/O errors: a missing file and a directory.
"$FP4SERVE" info "$T_TMP/missing.gguf" 2>"$T_TMP/err"
check_eq "missing file: exit status" "$?" "3"
check_eq "missing file: message" "$(cat "$T_TMP/err")" \
    "fp4serve: error: $T_TMP/missing.gguf: No such file or directory"
"$FP4SERVE" info "$dir" 2>"$T_TMP/err"
check_eq "directory: exit status" "$?" "3"
"$FP4SERVE" info 2>/dev/null
check_eq "no path: usage status" "$?" "2"
finish
