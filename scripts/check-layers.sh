#!/bin/sh
# check-layers.sh: fail on an #include that runs up the layer order of
# docs/style.md "Layers". An area may include its own headers, common/ and
# the program's top-level header (runner/sweep.h, engine/fp4.h), and the
# areas below it:
#   runner  cli > exec > analysis > config > client > store
#   engine  cmd > serve > text, model > cpu > format   (text and model are
#           peers: neither includes the other; cpu holds the kernels, and the
#           CPU backend that drives them is model/backend_cpu.c)
#   engine/cuda (a whole backend: kernels and forward pass over struct
#   model) sits above model and is included by no other area: model
#   reaches it only through the backend table (model/backend.h:
#   backend_cuda, backend_find).
#   common  includes nothing of runner/ or engine/.
# main.c of each program may include anything; tests/ is not checked.
# Run from the repository root (make check, make test). Files are the
# tracked and untracked-but-not-ignored ones (all of them outside a git
# work tree). Prints "check: include order kept" or one line per include
# that breaks it, and exits 1.
set -u
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files --cached --others --exclude-standard -- runner engine common |
        grep -E '\.(c|h|cu|cuh)$')
else
    files=$(find runner engine common -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
        -o -name '*.cuh' \) 2>/dev/null | sort)
fi
existing=""
for f in $files; do
    [ -f "$f" ] && existing="$existing $f"
done
[ -n "$existing" ] || exit 0
# One line per quoted include: FILE:LINE:HEADER (FILE's folder decides its
# area; a header without a folder is looked up beside FILE, then in common/,
# then at the program's top).
grep -Hn -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $existing |
    sed -E 's/^([^:]*):([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1:\2:\3/' |
    while IFS=: read -r file line hdr; do
        dir=${file%/*}
        if [ -f "$dir/$hdr" ]; then
            target="$dir/$hdr"
        elif [ -f "common/$hdr" ]; then
            target="common/$hdr"
        else
            case $file in
            runner/*) target="runner/$hdr" ;;
            engine/*) target="engine/$hdr" ;;
            *) # common/: whichever program holds it
                target="common/$hdr"
                [ -f "runner/$hdr" ] && target="runner/$hdr"
                [ -f "engine/$hdr" ] && target="engine/$hdr"
                ;;
            esac
        fi
        echo "$file:$line:$hdr:$target"
    done |
    awk -F: '
    BEGIN {
        # rank: higher may include lower; equal ranks of different areas may not
        r["runner/cli"] = 6; r["runner/exec"] = 5; r["runner/analysis"] = 4
        r["runner/config"] = 3; r["runner/client"] = 2; r["runner/store"] = 1
        r["engine/cmd"] = 7; r["engine/serve"] = 6; r["engine/cuda"] = 5
        r["engine/text"] = 4; r["engine/model"] = 4; r["engine/cpu"] = 3; r["engine/format"] = 2
        order["runner"] = "cli > exec > analysis > config > client > store > common"
        order["engine"] = "cmd > serve > text, model > cpu > format > common; cuda only through model/backend.h"
        bad = 0
    }
    # area of a path: "runner/cli", "engine/fp4.h" -> "engine" (top), "common"
    function area(p,   n, a) {
        n = split(p, a, "/")
        if (a[1] == "common") return "common"
        if (n >= 3) return a[1] "/" a[2]
        return a[1]
    }
    function name(ar) { sub(/^(runner|engine)\//, "", ar); return ar }
    {
        file = $1; line = $2; hdr = $3; target = $4
        from = area(file); to = area(target)
        prog = file; sub(/\/.*/, "", prog)
        if (from == to || to == "common") next
        if (file == "runner/main.c" || file == "engine/main.c") next
        why = ""
        if (from == "common")
            why = "common/ includes nothing of runner/ or engine/"
        else if (to == prog)
            next # the program top-level header (sweep.h, fp4.h)
        else if (to == "engine/cuda")
            why = "cuda is a backend: reach it through model/backend.h (the backend table)"
        else if (!(from in r) || !(to in r))
            why = "not an area of the layer order"
        else if (r[to] > r[from])
            why = name(from) " may not include " name(to) " (" prog ": " order[prog] ")"
        else if (r[to] == r[from])
            why = name(from) " and " name(to) " are peers and do not include each other"
        if (why != "") {
            printf "%s:%s: includes \"%s\": %s\n", file, line, hdr, why
            bad++
        }
    }
    END {
        if (bad) { printf "check: %d include(s) run up the layer order (docs/style.md \"Layers\")\n", bad; exit 1 }
        print "check: include order kept"
    }'
