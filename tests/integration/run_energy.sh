# run_energy.sh: energy per point. A stand-in nvidia-smi first on PATH
# draws a known power curve (GPU 0: 150 W, GPU 1: 50 W, GPU 2: 300 W,
# constant, at the -lms interval sweep asks for, with real timestamps) and
# answers sweep's other queries with nothing. Variant "pair" runs its
# server with CUDA_VISIBLE_DEVICES=0,1 (sweep samples -i 0,1: 200 W),
# variant "all" without it (every GPU: 500 W). energy_j must equal the
# curve's integral over the point (mean power x duration_s) within 2%,
# j_per_token that over total_output_tokens; `sweep plot` derives the same
# columns from the saved samples; REPORT.md names the source. Without
# nvidia-smi the columns stay empty (unless RAPL is readable here) and
# REPORT.md says why.
. tests/lib.sh

unset CUDA_VISIBLE_DEVICES
mkdir -p "$T_TMP/bin"
cat >"$T_TMP/bin/nvidia-smi" <<'SH'
#!/bin/sh
case "$*" in
*--query-gpu=timestamp,index,power.draw*) ;;
*) exit 0 ;; # compute apps (R9), the manifest's GPU list: none
esac
echo "$*" >>"$(dirname "$0")/argv.log"
ms=1000 ids=0,1,2
while [ $# -gt 0 ]; do
    case $1 in -lms) ms=$2; shift ;; -i) ids=$2; shift ;; esac
    shift
done
trap 'exit 0' INT TERM
while :; do
    ts=$(date '+%Y/%m/%d %H:%M:%S.%3N')
    for i in $(echo "$ids" | tr , ' '); do
        case $i in 0) w=150.00 ;; 1) w=50.00 ;; 2) w=300.00 ;; *) w='[N/A]' ;; esac
        echo "$ts, $i, $w"
    done
    sleep "$(awk -v ms="$ms" 'BEGIN { print ms / 1000 }')"
done
SH
chmod +x "$T_TMP/bin/nvidia-smi"

cat >"$T_TMP/e.yaml" <<YAML
name: energy
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}"]
  flags: {step-a-ms: 20, step-b-ms: 1, prefill-ms: 5}
  ready: {path: /health, timeout_s: 30}
bench:
  tool: builtin
  input_len: 8
  output_len: 64
  warmup: 0
  grid: ["2:6"]
variants:
  - {name: pair, server: {env: {CUDA_VISIBLE_DEVICES: "0,1"}}}
  - {name: all}
YAML

PATH="$T_TMP/bin:$PATH" "$SWEEP" run "$T_TMP/e.yaml" --out "$T_TMP/r" >"$T_TMP/r.out" 2>&1
check_eq "run exits 0" "$?" 0
cat "$T_TMP/bin/argv.log"
check "nvidia-smi asked at 5 Hz for the server's GPUs" grep -qx \
    -- '--query-gpu=timestamp,index,power.draw --format=csv,noheader,nounits -lms 200 -i 0,1' \
    "$T_TMP/bin/argv.log"
check "and for every GPU without CUDA_VISIBLE_DEVICES" grep -qx \
    -- '--query-gpu=timestamp,index,power.draw --format=csv,noheader,nounits -lms 200' \
    "$T_TMP/bin/argv.log"
check "the samples are kept beside the log" test -s "$T_TMP/r/pair/c2-n6.power.csv"
check "no sampler outlives its point" sh -c "! pgrep -f '$T_TMP/bin/nvidia-sm[i]' >/dev/null"
for v in pair:200:1 all:500:2; do # variant:watts:row
    name=${v%%:*} want=${v#*:} row=${v##*:}
    want=${want%:*}
    w=$(col "$T_TMP/r" mean_power_w "$row")
    d=$(col "$T_TMP/r" duration_s "$row")
    e=$(col "$T_TMP/r" energy_j "$row")
    tok=$(col "$T_TMP/r" total_output_tokens "$row")
    jt=$(col "$T_TMP/r" j_per_token "$row")
    check "$name: mean_power_w $w is $want W (2%)" within "$w" "$want" 0.02 rel
    known=$(awk -v w="$want" -v d="$d" 'BEGIN { print w * d }')
    check "$name: energy_j $e is the curve's integral $known J over duration_s $d (2%)" \
        within "$e" "$known" 0.02 rel
    check "$name: j_per_token $jt is energy_j / $tok output tokens" \
        within "$jt" "$(awk -v e="$e" -v t="$tok" 'BEGIN { print e / t }')" 0.001 rel
done
check "REPORT.md names the source of each variant" \
    grep -qx -- '- pair: nvidia-smi power.draw, GPUs 0,1, 5 Hz' "$T_TMP/r/REPORT.md"
check "... and the energy table" grep -q '^| all | 2 | 1 | 500' "$T_TMP/r/REPORT.md"
check_eq "fit.json carries each variant's source" \
    "$(jq -r '.variants.all.energy.source' "$T_TMP/r/fit.json")" "nvidia-smi power.draw, every GPU, 5 Hz"
check "... and its J/token per level" within \
    "$(jq -r '.variants.all.energy.levels[] | select(.concurrency == 2) | .j_per_token' "$T_TMP/r/fit.json")" \
    "$(col "$T_TMP/r" j_per_token 2)" 1e-6 rel
"$SWEEP" compare "$T_TMP/r:pair" "$T_TMP/r:all" >"$T_TMP/cmp.out" 2>&1
check_eq "compare exits 0" "$?" 0
cmp_ratio=$(grep -A2 '^energy per output token (J/token)' "$T_TMP/cmp.out" | awk '$1 == 2 { print $NF }')
check "compare shows energy per output token, all/pair $cmp_ratio (500/200 W x their durations)" \
    within "$cmp_ratio" "$(awk -v a="$(col "$T_TMP/r" j_per_token 2)" -v p="$(col "$T_TMP/r" j_per_token 1)" \
        'BEGIN { print a / p }')" 0.002 rel
cp "$T_TMP/r/points.csv" "$T_TMP/before.csv"
"$SWEEP" plot "$T_TMP/r" >/dev/null 2>&1
check_eq "plot exits 0" "$?" 0
check "sweep plot derives the same energy from the saved samples" \
    [ "$(col "$T_TMP/r" energy_j 2)" = "$("$CSVGET" "$T_TMP/before.csv" energy_j 2)" ]

# no nvidia-smi: empty columns (unless RAPL can be read here) and the reason
"$SWEEP" run "$T_TMP/e.yaml" --out "$T_TMP/n" --only all >"$T_TMP/n.out" 2>&1
check_eq "run without nvidia-smi exits 0" "$?" 0
sed -n '/^## Energy/,/^## /p' "$T_TMP/n/REPORT.md"
if cat /sys/class/powercap/intel-rapl:0/energy_uj >/dev/null 2>&1; then
    check "RAPL readable: REPORT.md says so" grep -q -- '- all: RAPL package energy (CPU)' "$T_TMP/n/REPORT.md"
    check "RAPL readable: energy_j filled" [ -n "$(col "$T_TMP/n" energy_j 1)" ]
else
    check "no source: REPORT.md says why" grep -q -- \
        '- all: not measured: no nvidia-smi on PATH, and no readable RAPL counter (' "$T_TMP/n/REPORT.md"
    check "no source: no energy_j column" sh -c "! '$CSVGET' '$T_TMP/n/points.csv' energy_j >/dev/null 2>&1"
    check "no source: no samples file" [ ! -e "$T_TMP/n/all/c2-n6.power.csv" ]
fi
finish
