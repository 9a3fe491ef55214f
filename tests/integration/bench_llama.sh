# bench_llama: tests/bench/bench_llama.sh against stand-ins for fp4serve and
# the two llama.cpp programs that print canned tables: the best of the rounds
# per batch and for PP512, the ratio fp4serve / llama.cpp, the ISA fp4serve
# picks, llama.cpp's settings line, the other runnable tasks counted before
# each round (from a stand-in /proc/loadavg) and the warning when they and
# the threads exceed the CPUs, and a skip with its reason (exit 0) without
# cmake, pip or the model.
. tests/lib.sh

bin="$T_TMP/bin"
mkdir -p "$bin"
touch "$T_TMP/model.gguf"
# fp4serve: round r (counted in a file) prints S_TG 100 * r at every batch;
# PP512 S_PP 500 then 600 then 550.
cat >"$bin/fp4serve" <<'SH'
#!/bin/sh
n=$(cat "$0.n" 2>/dev/null || echo 0)
case " $* " in
*" --prompt-len 1 "*) echo "n_kv_max = 1, n_threads = 1, decode = batched, attention = split, kernels = avx2" ;;
*" --prompt-len 512 "*)
    echo $((n + 1)) >"$0.n"
    echo "|   512 |      1 |    1 |    513 |    1.000 |   $(echo 500 600 550 | cut -d' ' -f$((n % 3 + 1))).00 |    0.010 |    50.00 |    1.010 |   500.00 |" ;;
*)
    for b in 1 4 16 64; do
        echo "|    32 |     32 |  $b |     64 |    0.100 |   300.00 |    0.200 |   $(((n % 3 + 1) * 100)).00 |    0.300 |   200.00 |"
    done ;;
esac
SH
cat >"$bin/llama-batched-bench" <<'SH'
#!/bin/sh
echo "llama_batched_bench: n_kv_max = 8192, n_batch = 2048, flash_attn = -1, n_threads = 2, n_threads_batch = 2"
for b in 1 4 16 64; do
    echo "|    32 |     32 |  $b |     64 |    0.091 |   351.01 |    0.250 |   $((b + 49)).00 |    0.341 |   187.47 |"
done
SH
cat >"$bin/llama-bench" <<'SH'
#!/bin/sh
echo "| llama ?B Q4_1 |  82.47 MiB |   134.52 M | CPU |  2 |  pp512 |  250.00 ± 3.20 |"
SH
chmod +x "$bin/fp4serve" "$bin/llama-batched-bench" "$bin/llama-bench"

run() { env FP4SERVE="$bin/fp4serve" MODEL="$T_TMP/model.gguf" "$@" sh "$TOPDIR/tests/bench/bench_llama.sh"; }

# /proc/loadavg as the kernel writes it: 1 running task (the reader) is a quiet machine
echo "0.50 0.40 0.30 1/123 4567" >"$T_TMP/quiet"
echo "3.10 3.00 2.90 4/123 4567" >"$T_TMP/busy"
run LLAMA_BIN="$bin" ROUNDS=3 LOADAVG="$T_TMP/quiet" NCPU=2 >"$T_TMP/out" 2>&1
check_eq "exits 0" "$?" "0"
check "prints llama.cpp's settings once" \
    [ "$(grep -c '^llama.cpp settings: n_kv_max = 8192, .* n_threads = 2' "$T_TMP/out")" = 1 ]
check "counts the other runnable tasks before each round" \
    grep -qx "other runnable tasks before each round: 0 0 0 (2 CPUs, 2 threads)" "$T_TMP/out"
check "quiet machine: no warning" sh -c "! grep -q 'busy machine' '$T_TMP/out'"
cat "$T_TMP/out"
check "names the table fp4serve picks" grep -q "== fp4serve --isa avx2 vs llama.cpp (avx2 build" "$T_TMP/out"
check "prints the CPU flags" grep -q "^CPU: .*flags:" "$T_TMP/out"
# best of 3 rounds: fp4serve 300 at every batch; llama.cpp B + 49
check_eq "B=1: best of the rounds, ratio" "$(grep 'decode B=1 ' "$T_TMP/out" | tr -s ' ')" \
    "decode B=1 50.00 300.00 6.00"
check_eq "B=64" "$(grep 'decode B=64 ' "$T_TMP/out" | tr -s ' ')" "decode B=64 113.00 300.00 2.65"
check_eq "PP512: llama-bench's mean, fp4serve's best S_PP" \
    "$(grep 'prefill PP512' "$T_TMP/out" | tr -s ' ')" "prefill PP512 250.00 600.00 2.40"

# 3 other runnable tasks + 2 threads on 2 CPUs: the table, then the warning
run LLAMA_BIN="$bin" ROUNDS=1 LOADAVG="$T_TMP/busy" NCPU=2 >"$T_TMP/outb" 2>&1
check "busy machine: still the table" grep -q "decode B=1 " "$T_TMP/outb"
check "busy machine: warns that the ratios mean nothing" \
    grep -q "^bench_llama: warning: busy machine (3 other runnable tasks + 2 threads > 2 CPUs)" "$T_TMP/outb"
run LLAMA_BIN="$bin" ROUNDS=1 LOADAVG="$T_TMP/busy" NCPU=8 >"$T_TMP/outb" 2>&1
check "3 others + 2 threads on 8 CPUs: no warning" sh -c "! grep -q 'busy machine' '$T_TMP/outb'"

# a failing llama.cpp run leaves its cells as "-", not a ratio (fp4serve's
# stand-in back at its first round: S_TG 100)
rm -f "$bin/fp4serve.n"
printf '#!/bin/sh\nexit 1\n' >"$bin/llama-batched-bench"
run LLAMA_BIN="$bin" ROUNDS=1 >"$T_TMP/out2" 2>&1
check_eq "llama.cpp failed: no ratio" "$(grep 'decode B=4 ' "$T_TMP/out2" | tr -s ' ')" \
    "decode B=4 - 100.00 -"

# skips, each with its reason and exit 0
out=$(run CMAKE="$T_TMP/no-cmake" LLAMA_DIR="$T_TMP/llama" 2>&1)
check_eq "no cmake: exit 0" "$?" "0"
check "no cmake: the reason" [ "$out" = "bench_llama: skipped: $T_TMP/no-cmake not installed (needed to build llama.cpp)" ]
out=$(run CMAKE=sh PIP="$T_TMP/no-pip" LLAMA_DIR="$T_TMP/llama" 2>&1)
check "no pip: the reason" [ "$out" = "bench_llama: skipped: $T_TMP/no-pip not installed (needed to fetch llama.cpp)" ]
out=$(env FP4SERVE="$bin/fp4serve" MODEL="$T_TMP/none.gguf" sh "$TOPDIR/tests/bench/bench_llama.sh" 2>&1)
check "no model: the reason" [ "$out" = "bench_llama: skipped: model not present ($T_TMP/none.gguf; run make models)" ]
finish
