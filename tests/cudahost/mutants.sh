#!/bin/sh
# mutants.sh: mutation proof of the CUDA host harness (docs/cudahost.md).
# Applies, one at a time, single-token mutants to engine/cuda/ (wrong
# bounds, swapped nibble order, removed __syncthreads, wrong shuffle
# distance, scale decoded with the wrong bias, ...), rebuilds the harness's
# parity binary and runs its tests (the mutant's likeliest test first, then
# the whole suite); a mutant is killed when a test fails, the harness
# reports a finding (exit 86), it crashes, or it runs past LIMIT seconds.
# Prints one line per mutant and the kill rate; the sources are restored
# after each mutant and on exit. Not part of `make test` (minutes per
# mutant: each rebuilds one or more .cu files).
#
#   sh tests/cudahost/mutants.sh [FILTER]    FILTER: an extended regex the mutant names must match
#
# Knobs: BUILD (build), LIMIT (300 s per test run), JOBS (2), CH_OPT (-O1:
# the harness objects are rebuilt at this level, quicker to compile).
set -u
BUILD=${BUILD:-build}
LIMIT=${LIMIT:-300}
JOBS=${JOBS:-2}
CH_OPT=${CH_OPT:--O1} # quicker rebuilds of the mutated files
FILTER=${1:-}
# The architectures the build used: another list would rebuild everything.
ARCHS=$(sed -n "s/^CUDA_ARCHS='\(.*\)'$/\1/p" "$BUILD/gen/cuda-archs" 2>/dev/null)
mk() { make -s -j"$JOBS" BUILD="$BUILD" CH_OPT="$CH_OPT" ${ARCHS:+CUDA_ARCHS="$ARCHS"} "$@"; }
LOG=$(mktemp -d "${TMPDIR:-/tmp}/mutants.XXXXXX")
SAVED=""

restore() {
    [ -n "$SAVED" ] && cp "$LOG/saved" "$SAVED" && touch "$SAVED"
    SAVED=""
}
trap 'restore; exit 130' INT TERM
trap 'restore' EXIT

# name @@ file @@ occurrence @@ from @@ to @@ first test to run (files that rebuild
# fewest objects first); "qwen3:TEST" runs cudahost_qwen3 (qwen3 and qwen3moe)
# and "gptoss:TEST" cudahost_gptoss (gpt-oss) instead of cudahost_parity
MUTANTS=$(cat <<'EOF'
attn-key-bound @@ engine/cuda/attention.cu @@ 1 @@ n_keys - t0); @@ n_keys - t0 + 1); @@ parity_q4_1
attn-max-barrier @@ engine/cuda/attention.cu @@ 2 @@ __syncthreads(); @@ ; @@ parity_q4_1
attn-reuse-barrier @@ engine/cuda/attention.cu @@ 5 @@ __syncthreads(); @@ ; @@ parity_q4_1
attn-sum-order @@ engine/cuda/attention.cu @@ 1 @@ sum[h] += red[w][h]; @@ sum[h] = red[w][h]; @@ parity_q4_1
prep-half-sum-distance @@ engine/cuda/ops.cu @@ 1 @@ for (int o = 8; o > 0; o >>= 1) @@ for (int o = 16; o > 0; o >>= 1) @@ parity_q4_1
norm-barrier @@ engine/cuda/ops.cu @@ 1 @@ __syncthreads(); @@ ; @@ parity_q4_1
embed-bound @@ engine/cuda/ops.cu @@ 1 @@ u < n / 16; @@ u <= n / 16; @@ parity_q4_1
rope-pair-bound @@ engine/cuda/ops.cu @@ 1 @@ i < half ? rotate( @@ i <= half ? rotate( @@ parity_q4_1
rope-table-index @@ engine/cuda/ops.cu @@ 1 @@ rotate(x0, x1, cs[i]) @@ rotate(x0, x1, cs[i + 1]) @@ parity_q4_1
rope-neox-off @@ engine/cuda/ops.cu @@ 1 @@ c->rope_neox ? 1 : 0 @@ 0 @@ qwen3:qwen3_parity
qk-norm-no-rms @@ engine/cuda/ops.cu @@ 1 @@ x0 = __fmul_rn(__fmul_rn(x0, rms[h]), A.qn[a]); @@ x0 = __fmul_rn(x0, A.qn[a]); @@ qwen3:qwen3_parity
moe-no-renorm @@ engine/cuda/moe.cu @@ 1 @@ w[j] = __fdiv_rn(w[j], chosen); @@ w[j] = w[j]; @@ qwen3:qwen3moe_parity
moe-grouped-row @@ engine/cuda/moe.cu @@ 1 @@ A.grow[g++] = i / A.k; @@ A.grow[g++] = (i + 1) / A.k % (A.G / A.k); @@ qwen3:qwen3moe_parity
moe-tile-end @@ engine/cuda/moe.cu @@ 1 @@ min(f + A.H, off[e + 1]) @@ f + A.H @@ qwen3:qwen3moe_parity
moe-combine-last @@ engine/cuda/moe.cu @@ 1 @@ acc = j == 0 ? v : __fadd_rn(acc, v); @@ acc = v; @@ qwen3:qwen3moe_parity
moe-hit @@ engine/cuda/moe.cu @@ 1 @@ A.hit[t] = cnt[t] > 0; @@ A.hit[t] = cnt[t] > 1; @@ qwen3:counters
expert-stride @@ engine/cuda/matmul.cu @@ 1 @@ J.w += (size_t)e * J.e_stride; @@ J.w += (size_t)e * J.row_bytes; @@ qwen3:qwen3moe_parity
expert-scale @@ engine/cuda/matmul.cu @@ 1 @@ J.scale = J.e_scale[e]; @@ J.scale = J.e_scale[0]; @@ qwen3:qwen3moe_parity
q8-clamp @@ engine/cuda/ops.cu @@ 1 @@ q > 127 ? 127 : q @@ q > 127 ? 126 : q @@ parity_q4_1
combine-chunks @@ engine/cuda/ops.cu @@ 1 @@ (A.pos[row] + CU_CHUNK) / CU_CHUNK @@ (A.pos[row] + 1) / CU_CHUNK @@ parity_q4_1
gemv-unit-bound @@ engine/cuda/matmul.cu @@ 1 @@ u < n_units; @@ u <= n_units; @@ parity_q4_1
gemv-has-min @@ engine/cuda/matmul.cu @@ 1 @@ if (qt<T>::has_min) @@ if (!qt<T>::has_min) @@ parity_q4_1
find-job-boundary @@ engine/cuda/matmul.cu @@ 1 @@ idx >= g.start[1] @@ idx > g.start[1] @@ parity_q4_1
tc-tile-barrier @@ engine/cuda/matmul.cu @@ 1 @@ __syncthreads(); @@ ; @@ parity_q4_1
tc-store-barrier @@ engine/cuda/matmul.cu @@ 3 @@ __syncthreads(); @@ ; @@ parity_q4_1
tc-act-bound @@ engine/cuda/matmul.cu @@ 1 @@ if (n0 + br < rows) @@ if (n0 + br <= rows) @@ parity_full_step
tc-out-bound @@ engine/cuda/matmul.cu @@ 1 @@ n0 + n < rows) @@ n0 + n <= rows) @@ parity_full_step
q4_0-offset @@ engine/cuda/quant.cuh @@ 1 @@ 0x0F0F0F0Fu, 0x08080808u @@ 0x0F0F0F0Fu, 0x07070707u @@ parity_q4_0
q4_1-nibble-order @@ engine/cuda/quant.cuh @@ 2 @@ int sh = (u & 1) * 4; @@ int sh = (~u & 1) * 4; @@ parity_q4_1
q5_0-high-bits @@ engine/cuda/quant.cuh @@ 1 @@ >> ((u & 1) * 16) @@ >> ((u & 1) * 8) @@ parity_q5_0
q8_0-half-offset @@ engine/cuda/quant.cuh @@ 1 @@ b + 2 + 16 * (u & 1) @@ b + 2 + 8 * (u & 1) @@ parity_q8_0
q4_k-min-bits @@ engine/cuda/quant.cuh @@ 1 @@ mn = s[j + 4] & 63; @@ mn = s[j + 4] & 31; @@ parity_q4_k
q6_k-offset @@ engine/cuda/quant.cuh @@ 1 @@ 0x20202020u @@ 0x1F1F1F1Fu @@ parity_q6_k
mxfp4-scale-bias @@ engine/cuda/quant.cuh @@ 1 @@ (uint32_t)(e - 1) << 23 @@ (uint32_t)(e - 2) << 23 @@ parity_mxfp4
mxfp4-nibble-order @@ engine/cuda/quant.cuh @@ 5 @@ int sh = (u & 1) * 4; @@ int sh = (~u & 1) * 4; @@ parity_mxfp4
e2m1-table @@ engine/cuda/quant.cuh @@ 1 @@ 0x0C080604u @@ 0x0C080605u @@ parity_mxfp4
nvfp4-scale-bias @@ engine/cuda/quant.cuh @@ 1 @@ (e + 119) << 23 @@ (e + 120) << 23 @@ parity_nvfp4
nvfp4-nibble-order @@ engine/cuda/quant.cuh @@ 1 @@ o.q[2] = e2m1_x2(w0 >> 4 @@ o.q[2] = e2m1_x2(w0 >> 0 @@ parity_nvfp4
warp-sum-distance @@ engine/cuda/common.cuh @@ 1 @@ for (int o = 16; o > 0; o >>= 1) @@ for (int o = 8; o > 0; o >>= 1) @@ parity_q4_1
warp-max-distance @@ engine/cuda/common.cuh @@ 3 @@ for (int o = 16; o > 0; o >>= 1) @@ for (int o = 16; o > 1; o >>= 1) @@ parity_q4_1
kv-copy-k-only @@ engine/cuda/backend.cu @@ 1 @@ (unsigned)(c->n_layer * c->n_head_kv), 2); @@ (unsigned)(c->n_layer * c->n_head_kv), 1); @@ prefix_copy
kv-copy-skip-layer @@ engine/cuda/backend.cu @@ 1 @@ (unsigned)(c->n_layer * c->n_head_kv), 2); @@ (unsigned)((c->n_layer - 1) * c->n_head_kv), 2); @@ prefix_copy
kv-copy-last-block @@ engine/cuda/backend.cu @@ 1 @@ (A.words + KV_COPY_WORDS - 1) / KV_COPY_WORDS @@ A.words / KV_COPY_WORDS @@ prefix_copy
kv-copy-tail @@ engine/cuda/backend.cu @@ 1 @@ : A.words; @@ : A.words - 8; @@ prefix_copy
kv-copy-src-slot @@ engine/cuda/backend.cu @@ 1 @@ A.max_batch + A.src) @@ A.max_batch + A.dst) @@ prefix_copy
kv-copy-none @@ engine/cuda/cuda.c @@ 1 @@ .kv_copy = cu_kv_copy @@ .kv_copy = NULL @@ prefix_copy
sink-walk-off @@ engine/cuda/attention.cu @@ 1 @@ A.sinks ? A.sinks[kvh * g + h] : @@ A.sinks ? -INFINITY : @@ gptoss:gptoss_parity_tensor
sink-combine-off @@ engine/cuda/ops.cu @@ 1 @@ A.sinks ? A.sinks[hq] : @@ A.sinks ? -INFINITY : @@ gptoss:gptoss_parity_gemv
swa-first-key @@ engine/cuda/common.cuh @@ 1 @@ int lo = pos + 1 - window; @@ int lo = pos - window; @@ gptoss:gptoss_parity_gemv
swa-combine-start @@ engine/cuda/ops.cu @@ 1 @@ int c0 = first_key(A.pos[row], A.window) / CU_CHUNK; @@ int c0 = 0; @@ gptoss:gptoss_parity_gemv
swa-plan-first-chunk @@ engine/cuda/cuda.c @@ 1 @@ n_keys > win ? n_keys - win : 0 @@ n_keys > win ? n_keys - win + MODEL_ATTN_CHUNK : 0 @@ gptoss:gptoss_parity_gemv
q-bias-off @@ engine/cuda/ops.cu @@ 1 @@ x0 = __fadd_rn(x0, A.bq[(size_t)h * A.hd + a]); @@ x0 = x0; @@ gptoss:gptoss_parity_gemv
v-bias-off @@ engine/cuda/ops.cu @@ 1 @@ y0 = __fadd_rn(y0, bv[a]); @@ y0 = y0; @@ gptoss:gptoss_parity_gemv
o-bias-off @@ engine/cuda/ops.cu @@ 1 @@ __fadd_rn(y[r + i], b[i]) @@ y[r + i] @@ gptoss:gptoss_parity_gemv
router-bias-off @@ engine/cuda/moe.cu @@ 1 @@ A.bias ? __fadd_rn(acc, A.bias[e]) : acc @@ acc @@ gptoss:gptoss_expert_counters
oai-no-softmax @@ engine/cuda/moe.cu @@ 1 @@ w[j] = __fmul_rn(w[j], inv); @@ w[j] = w[j]; @@ gptoss:gptoss_parity_gemv
swiglu-no-clamp @@ engine/cuda/ops.cu @@ 1 @@ x = x < limit ? x : limit; @@ x = x; @@ gptoss:gptoss_parity_gemv
expert-gate-bias-row @@ engine/cuda/moe.cu @@ 1 @@ A.gexp[g] = t; @@ A.gexp[g] = 0; @@ gptoss:gptoss_parity_gemv
expert-down-bias-off @@ engine/cuda/moe.cu @@ 1 @@ y = __fadd_rn(y, A.bias[ @@ y = __fadd_rn(0.0f * y, A.bias[ @@ gptoss:gptoss_parity_gemv
EOF
)

# apply FILE N FROM TO: replace the Nth occurrence of FROM in FILE.
apply() {
    python3 - "$@" <<'PY'
import sys
path, n, old, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = open(path).read()
i = -1
for _ in range(n):
    i = s.find(old, i + 1)
    if i < 0:
        sys.exit("mutant: occurrence %d of %r not found in %s" % (n, old, path))
open(path, "w").write(s[:i] + new + s[i + len(old):])
PY
}

trim() { printf '%s' "$1" | sed 's/^ *//; s/ *$//'; }

total=0
killed=0
survivors=""
echo "$MUTANTS" | while IFS= read -r line; do echo "$line"; done >"$LOG/list"
while IFS= read -r line; do
    name=$(trim "${line%% @@ *}"); rest=${line#* @@ }
    file=$(trim "${rest%% @@ *}"); rest=${rest#* @@ }
    nth=$(trim "${rest%% @@ *}"); rest=${rest#* @@ }
    from=$(trim "${rest%% @@ *}"); rest=${rest#* @@ }
    to=$(trim "${rest%% @@ *}"); first=$(trim "${rest#* @@ }")
    printf "%s\n" "$name" | grep -qE -- "${FILTER:-.}" || continue
    BIN="$BUILD/tests/cudahost_parity"
    case "$first" in *:*) BIN="$BUILD/tests/cudahost_${first%%:*}" first=${first#*:} ;; esac
    total=$((total + 1))
    cp "$file" "$LOG/saved"
    SAVED=$file
    if ! apply "$file" "$nth" "$from" "$to"; then
        restore
        echo "ERROR  $name: could not apply"
        continue
    fi
    if ! mk "$BIN" >"$LOG/$name.build" 2>&1; then
        restore
        killed=$((killed + 1))
        echo "killed $name (does not compile)"
        continue
    fi
    if [ ! "$BIN" -nt "$file" ]; then
        restore
        echo "ERROR  $name: $BIN was not rebuilt after the mutation"
        continue
    fi
    how=""
    for t in "$first" ""; do
        timeout -k 5 "$LIMIT" "$BIN" $t >"$LOG/$name.run" 2>&1
        rc=$?
        if [ "$rc" -ne 0 ]; then
            why=$(grep -m1 -E '^cudahost: |check failed' "$LOG/$name.run" | cut -c1-150)
            [ "$rc" -ge 124 ] && [ -z "$why" ] && why="timed out or killed (exit $rc)"
            how="by ${t:-the whole suite}: ${why:-exit $rc}"
            break
        fi
    done
    restore
    if [ -n "$how" ]; then
        killed=$((killed + 1))
        echo "killed $name $how"
    else
        survivors="$survivors $name"
        echo "SURVIVED $name ($file: '$from' -> '$to')"
    fi
done <"$LOG/list"
mk "$BUILD/tests/cudahost_parity" "$BUILD/tests/cudahost_qwen3" "$BUILD/tests/cudahost_gptoss" >/dev/null 2>&1
echo "mutants: $killed of $total killed${survivors:+; survivors:$survivors}"
