# cuda_archs: what no GPU is needed to check of the CUDA build.
# 1. fp4serve carries machine code (an ELF cubin) for every architecture of
#    CUDA_ARCHS and PTX for the last one, as $BUILD/gen/cuda-archs records
#    them (Makefile); a default build covers Ampere to Blackwell, sm_80 to
#    sm_120, as far as its nvcc lists them. Read with cuobjdump when there
#    is one, else from the fatbin headers of .nv_fatbin (fatbin_list below).
# 2. The device versions of quant.cuh's decoders and of the intrinsic
#    wrappers they differ by on the host (the `#ifdef __CUDA_ARCH__` ones,
#    which engine_cudadec cannot see) compile, for the oldest architecture
#    built, to kernels that store their result: a wrapper that recursed
#    into itself compiled to a kernel that stores nothing.
# Skipped, with the reason, in a build without nvcc.
. tests/lib.sh

rec="$BUILD/gen/cuda-archs"
NVCC='' CUDA_ARCHS='' CUDA_PTX='' CUDA_DEFAULT=''
[ -x "$FP4SERVE" ] || { fail "no $FP4SERVE"; finish; exit; }
if [ ! -f "$rec" ]; then
    # A binary with device code but no record of what it was built for.
    check "$rec exists (fp4serve has device code)" ! grep -q nv_fatbin "$FP4SERVE"
    finish
    exit
fi
. "$rec"
if [ -z "$NVCC" ]; then
    echo "skipped: fp4serve built without CUDA ($rec: no nvcc at build time)"
    finish
    exit
fi

# fatbin_list FILE: "elf sm_NN" / "ptx sm_NN" per image of every fatbin in
# FILE (header layout as cuobjdump reads it: magic 0xBA55ED50, version 1,
# 16-byte header, then images of kind 1 = PTX, 2 = ELF, arch at byte 28).
fatbin_list() {
    python3 - "$1" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
magic = struct.pack("<I", 0xBA55ED50)
off = data.find(magic)
while off >= 0:
    _, ver, hsize, fsize = struct.unpack_from("<IHHQ", data, off) if off + 16 <= len(data) else (0, 0, 0, 0)
    if ver != 1 or hsize != 16 or off + 16 + fsize > len(data):
        off = data.find(magic, off + 1)
        continue
    p, end = off + 16, off + 16 + fsize
    while p + 32 <= end:
        kind, _, ehsize, size = struct.unpack_from("<HHIQ", data, p)
        (arch,) = struct.unpack_from("<I", data, p + 28)
        if kind in (1, 2) and ehsize >= 32:
            print("%s sm_%d" % ("ptx" if kind == 1 else "elf", arch))
        if ehsize == 0:
            break
        p += ehsize + size
    off = data.find(magic, end)
EOF
}
# cuobjdump_list FILE: the same lines from cuobjdump --list-elf / --list-ptx.
cuobjdump_list() {
    "$CUOBJDUMP" --list-elf "$1" | sed -n 's/.*\.\(sm_[0-9a-z]*\)\.cubin$/elf \1/p'
    "$CUOBJDUMP" --list-ptx "$1" | sed -n 's/.*\.\(sm_[0-9a-z]*\)\.ptx$/ptx \1/p'
}
CUOBJDUMP=$(command -v cuobjdump || ls "$(dirname "$NVCC")/cuobjdump" 2>/dev/null)
if [ -n "$CUOBJDUMP" ]; then
    lister=cuobjdump_list
else
    lister=fatbin_list
fi
$lister "$FP4SERVE" | sort -u >"$T_TMP/images"
echo "images in fp4serve ($lister): $(tr '\n' ' ' <"$T_TMP/images")"
check "$rec lists the architectures built ($CUDA_ARCHS)" [ -n "$CUDA_ARCHS" ]
for a in $CUDA_ARCHS; do
    check "fp4serve has machine code for $a" grep -qx "elf $a" "$T_TMP/images"
done
check "fp4serve has PTX for the last one, $CUDA_PTX" grep -qx "ptx sm_${CUDA_PTX#compute_}" "$T_TMP/images"
check_eq "no other machine code than CUDA_ARCHS" "$(grep -c '^elf ' "$T_TMP/images")" \
    "$(echo "$CUDA_ARCHS" | wc -w)"
if [ "$CUDA_DEFAULT" = 1 ]; then
    known=$("$NVCC" --list-gpu-code 2>/dev/null)
    for a in sm_80 sm_86 sm_89 sm_90 sm_100 sm_120; do
        if echo "$known" | grep -qx "$a"; then
            check "the default CUDA_ARCHS covers $a" grep -qx "elf $a" "$T_TMP/images"
        else
            echo "($NVCC does not list $a)"
        fi
    done
else
    echo "(CUDA_ARCHS given to make: the default list is not checked)"
fi

# 2. Device code of the decoders and of the wrappers, compiled to PTX.
{
    echo '#include "cuda/quant.cuh"'
    # QD RET NAME(T a, T b) whose body starts with #ifdef __CUDA_ARCH__
    awk '/^QD [a-z0-9_]+ [a-z0-9_]+\(.*\)$/ { sig = $0; n = NR; next }
         NR == n + 1 && /^\{/ { next }
         NR == n + 2 && /^#ifdef __CUDA_ARCH__/ { print sig }' \
        "$TOPDIR/engine/cuda/quant.cuh" |
        sed 's/^QD \([a-z0-9_]*\) \([a-z0-9_]*\)(\(.*\))$/\1 \2 \3/' |
        while read -r ret name params; do
            args="" k=0
            for t in $(echo "$params" | tr ',' '\n' | awk '{ print $1 }'); do
                case "$t" in
                float) a="__uint_as_float(in[$k])" ;;
                *) a="($t)in[$k]" ;;
                esac
                args="$args${args:+, }$a"
                k=$((k + 1))
            done
            echo "extern \"C\" __global__ void wrap_$name(const uint32_t *in, $ret *out) { out[0] = $name($args); }"
            echo "$name" >>"$T_TMP/wrappers"
        done
    cat <<'EOF'
template <uint32_t T> __device__ void decode(const uint8_t *row, float *out)
{
    float s = 0.0f;
    if constexpr (is_float_type(T)) {
        float v[8];
        ft<T>::at8(row, 8 * (int)threadIdx.x, v);
        for (int i = 0; i < 8; i++)
            s += v[i];
        s += ft<T>::at(row, (int)threadIdx.y);
    } else {
        unit16 o;
        qt<T>::unit(row, (int)threadIdx.x, o);
        for (int i = 0; i < 16; i++)
            s += unit_value<T>(o, i);
    }
    out[threadIdx.x] = s;
}
#define PROBE(t) \
    extern "C" __global__ void decode_##t(const uint8_t *row, float *out) { decode<t>(row, out); }
CU_WEIGHT_TYPES(PROBE)
EOF
} >"$T_TMP/probe.cu"
check "quant.cuh: the device/host wrappers found ($(tr '\n' ' ' <"$T_TMP/wrappers" 2>/dev/null))" \
    [ "$(wc -l <"$T_TMP/wrappers" 2>/dev/null || echo 0)" -ge 5 ]
oldest=$(echo "$CUDA_ARCHS" | awk '{ print $1 }')
if "$NVCC" -std=c++17 -O3 -arch="${oldest/sm_/compute_}" -I"$TOPDIR/engine" -I"$TOPDIR/common" \
    -ptx -o "$T_TMP/probe.ptx" "$T_TMP/probe.cu" >"$T_TMP/nvcc.log" 2>&1; then
    ok "the probes compile for $oldest"
    # kernel name and its count of stores to global (or generic) memory
    awk '/\.entry / { name = $3; sub(/\(.*/, "", name); st[name] = 0; cur = name }
         cur != "" && /^[\t ]*(@%p[0-9]+ )?(st|atom|red)\./ && !/(st|atom|red)\.(shared|local|param)/ { st[cur]++ }
         END { for (k in st) print k, st[k] }' "$T_TMP/probe.ptx" | sort >"$T_TMP/stores"
    check_eq "one probe kernel per wrapper and weight type" "$(wc -l <"$T_TMP/stores")" \
        "$(($(wc -l <"$T_TMP/wrappers") + $(grep -o 'X(Q_[A-Z0-9_]*)' "$TOPDIR/engine/cuda/quant.cuh" | wc -l)))"
    while read -r name n; do
        check "device code of $name stores its result ($n stores)" [ "$n" -gt 0 ]
    done <"$T_TMP/stores"
else
    fail "the probes compile for $oldest: $(grep -m1 -i error "$T_TMP/nvcc.log")"
fi
finish
