# engine_neon: the NEON kernel table (engine/cpu/matmul_neon.c) on aarch64,
# under qemu-user: engine_kernels and engine_quant cross-compiled by make
# (build/aarch64/, when aarch64-linux-gnu-gcc is installed) run with qemu's
# default CPU (dot-product extension: sdot) and as a Cortex-A57 (ARMv8.0:
# smull and pairwise adds). Both compare every table with the portable one
# bit for bit; engine_ops checks that the portable attention and SiLU give
# the bits they give on x86 (a pinned digest). Skipped, with the reason,
# when the cross compiler or qemu does not work here.
. tests/lib.sh

# The Makefile's probe (scripts/probe-a64.sh) leaves its reason in SKIP when
# the cross compiler or qemu does not work here.
QEMU=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
if [ -f "$BUILD/aarch64/SKIP" ]; then
    skip "NEON tests: $(cat "$BUILD/aarch64/SKIP")"
    finish
    exit $?
fi
if [ -z "$QEMU" ] || [ ! -x "$BUILD/aarch64/engine_kernels" ]; then
    skip "NEON tests: no qemu-aarch64 or no $BUILD/aarch64/ (scripts/deps.sh installs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user-static)"
    finish
    exit $?
fi
for t in engine_kernels engine_quant engine_ops; do
    for cpu in max cortex-a57; do
        "$QEMU" -cpu "$cpu" "$BUILD/aarch64/$t" >"$T_TMP/out" 2>&1
        check_eq "$t on aarch64 ($cpu): exit status" "$?" "0"
        check "$t on aarch64 ($cpu): no failure" grep -q ' 0 failed$' "$T_TMP/out"
    done
done
"$QEMU" "$BUILD/aarch64/engine_kernels" >"$T_TMP/out" 2>&1
check "aarch64: the automatic choice is the NEON table" grep -q "auto kernels: neon" "$T_TMP/out"
finish
