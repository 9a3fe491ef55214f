#!/bin/sh
# check-paths.sh: fail on a path named in a comment that does not exist in
# the tree (a file moved or renamed and its mentions left behind). Looks at
# C/CUDA comments (/* */ and //) and at whole-line '#' comments of shell
# scripts, the Makefile, Python and gnuplot files. A token counts as a path
# when it starts with a top-level folder of the tree (runner/, engine/,
# tests/, docs/, ...), or with an area folder (cpu/, analysis/,
# integration/, ...) and ends in a file extension. It is found when it names
# a file or folder from the repository root, from runner/, engine/ or
# tests/, or beside the commenting file; a module without its extension
# (engine/model/sample) and a glob (tests/integration/run_*.sh) count when
# something matches. Placeholders in capitals (plots/NAME.gp) and
# generated folders (build/, models/, results/) are skipped. Run from the
# repository root (make check, make test); prints "check: paths in
# comments exist" or one line per stale path, and exits 1.
set -u
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    all=$(git ls-files --cached --others --exclude-standard)
else
    all=$(find . -type f ! -path './.git/*' ! -path './build/*' | sed 's#^\./##' | sort)
fi
csrc=""
hsrc=""
for f in $all; do
    [ -f "$f" ] || continue
    case $f in
    build/* | models/* | results/*) ;;
    *.c | *.h | *.cu | *.cuh) csrc="$csrc $f" ;;
    *.sh | Makefile | */Makefile | *.py | *.gp) hsrc="$hsrc $f" ;;
    esac
done
# top-level folders, and the area folders one level below the program and test roots
tops=$(echo "$all" | grep / | cut -d/ -f1 | sort -u | grep -v -x -E 'build|models|results' | tr '\n' ' ')
areas=$(echo "$all" | grep -E '^(runner|engine|tests)/[^/]+/' | cut -d/ -f2 | sort -u | tr '\n' ' ')
{
    # C comments: FILE:LINE:TEXT, string and character literals skipped
    [ -n "$csrc" ] && awk '
    FNR == 1 { inblock = 0 }
    {
        line = $0; out = ""; i = 1; n = length(line); instr = ""
        while (i <= n) {
            c = substr(line, i, 1)
            if (inblock) {
                if (substr(line, i, 2) == "*/") { inblock = 0; i += 2; out = out " "; continue }
                out = out c; i++; continue
            }
            if (instr != "") {
                if (c == "\\") { i += 2; continue }
                if (c == instr) instr = ""
                i++; continue
            }
            if (c == "\"" || c == "'\''") { instr = c; i++; continue }
            if (substr(line, i, 2) == "/*") { inblock = 1; i += 2; continue }
            if (substr(line, i, 2) == "//") { out = out substr(line, i + 2); break }
            i++
        }
        if (out ~ /\//) print FILENAME ":" FNR ":" out
    }' $csrc
    # whole-line # comments (not #! and not C preprocessor lines)
    [ -n "$hsrc" ] && awk '/^[[:space:]]*#/ && !/^#!/ && /\// { print FILENAME ":" FNR ":" $0 }' $hsrc
} | awk -v tops="$tops" -v areas="$areas" '
    BEGIN {
        nt = split(tops, t, " "); for (i = 1; i <= nt; i++) top[t[i]] = 1
        na = split(areas, a, " "); for (i = 1; i <= na; i++) area[a[i]] = 1
    }
    {
        split($0, f, ":"); file = f[1]; line = f[2]
        text = $0; sub(/^[^:]*:[^:]*:/, "", text)
        rest = text
        while (match(rest, /[A-Za-z0-9_.*-]+(\/[A-Za-z0-9_.*-]+)+/)) {
            tok = substr(rest, RSTART, RLENGTH)
            before = RSTART > 1 ? substr(rest, RSTART - 1, 1) : " "
            rest = substr(rest, RSTART + RLENGTH)
            if (before ~ /[\/.<:$@-]/) continue       # URL, ./x, <sys/x.h>, $VAR/x
            sub(/[.]+$/, "", tok)                      # sentence end
            if (rest ~ /^[\/A-Za-z0-9_]*\(/) continue  # call such as cpu/x(
            n = split(tok, c, "/")
            skip = 0
            for (i = 1; i <= n; i++)
                if (c[i] ~ /^[A-Z][A-Z0-9_]*([.][a-z]+)?$/ && c[i] !~ /^(README|DESIGN|REPORT)/ || c[i] == "..." || c[i] == "")
                    skip = 1
            if (skip) continue
            if (c[1] in top) kind = "top"
            else if ((c[1] in area) && c[n] ~ /[.](c|h|cu|cuh|sh|py|md|gp|yaml|json|txt)$/) kind = "area"
            else continue
            print file ":" line ":" tok
        }
    }' | while IFS=: read -r file line tok; do
    dir=${file%/*}
    [ "$dir" = "$file" ] && dir=.
    found=0
    for base in . runner engine tests "$dir"; do
        for cand in "$base/$tok" "$base/$tok.c" "$base/$tok.h"; do
            # shellcheck disable=SC2086 # a glob in the comment is expanded on purpose
            for m in $cand; do
                [ -e "$m" ] && found=1 && break
            done
            [ $found = 1 ] && break
        done
        [ $found = 1 ] && break
    done
    [ $found = 1 ] || echo "$file:$line: '$tok' names no file in the tree"
done | awk '{ print } END { if (NR) { printf "check: %d stale path(s) in comments\n", NR; exit 1 } print "check: paths in comments exist" }'
