#!/bin/sh
# check-banned.sh: fail if any C/CUDA source calls a banned function
# (docs/style.md): unbounded string functions, ato*, shells, and raw malloc
# outside common/xalloc.c. A line may opt out with a comment "allow: why".
set -u
files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null)
[ -n "$files" ] || exit 0
bad=0
hits=$(grep -Hn -E '\b(sprintf|vsprintf|strcpy|strcat|strncpy|strtok|gets|atoi|atol|atof|system|popen)[[:space:]]*\(' $files | grep -v 'allow:')
if [ -n "$hits" ]; then
    echo "banned calls (see docs/style.md):"
    echo "$hits"
    bad=1
fi
hits=$(grep -Hn -E '(^|[^_a-z])(malloc|calloc|realloc)[[:space:]]*\(' $(echo "$files" | grep -v '^common/xalloc.c$') \
    | grep -v -E 'x(malloc|calloc|realloc)|cudaMalloc|allow:' )
if [ -n "$hits" ]; then
    echo "raw allocation outside common/xalloc.c (use xmalloc/xcalloc/xrealloc):"
    echo "$hits"
    bad=1
fi
[ $bad = 0 ] && echo "check: no banned calls"
exit $bad
