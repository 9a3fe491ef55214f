#!/bin/sh
# probe-a64.sh CC DIR: can CC build a static aarch64 program that uses the C
# library and libm, and does qemu run it? Used by the Makefile before it
# cross-compiles the NEON kernel tests. Exit 0 when both work (DIR/SKIP
# removed); else exit 1 with the reason on stderr and in DIR/SKIP, which
# tests/integration/engine_neon.sh prints when it skips.
cc=$1
dir=$2
mkdir -p "$dir"
no() {
    echo "$*" >"$dir/SKIP"
    echo "probe-a64: $*" >&2
    exit 1
}
[ -n "$cc" ] || no "no aarch64 cross compiler (scripts/deps.sh installs gcc-aarch64-linux-gnu)"
src="$dir/probe.c"
cat >"$src" <<'C'
#include <math.h>
#include <stdint.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    (void)argv;
    uint32_t x = (uint32_t)argc * 7u;
    printf("%u %.1f\n", x, sqrt((double)x * 7.0));
    return 0;
}
C
if ! "$cc" -O2 -static -o "$dir/probe" "$src" -lm 2>"$dir/probe.err"; then
    why=$(grep -m1 -i 'error' "$dir/probe.err" || head -n 1 "$dir/probe.err")
    no "$cc cannot build a static program with <stdint.h> and <math.h> (${why:-it failed and printed nothing}; scripts/deps.sh installs libc6-dev-arm64-cross)"
fi
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
[ -n "$qemu" ] || no "no qemu-aarch64 to run the cross-compiled tests (scripts/deps.sh installs qemu-user-static)"
out=$("$qemu" "$dir/probe" 2>&1)
[ "$out" = "7 7.0" ] || no "$qemu did not run the probe program (it printed '$out')"
rm -f "$dir/SKIP" "$dir/probe.err"
exit 0
