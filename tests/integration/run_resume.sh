# run_resume.sh: --resume never mixes two setups or two extraction rules in
# one folder, and says what changed (issue 23: W3-H1, W3-H2, W3-N6, W3-N7).
# A model that changes only past its first MiB (same size) is refused,
# naming the model file; a changed dataset is refused naming the dataset;
# raising bench.repeat adds the repeats and reruns nothing; a points.csv
# that `sweep plot` rebuilt from the logs (keys empty) resumes without
# rerunning its ok points; the extraction overrides `sweep plot --pattern`
# saved are applied to the points a resume adds, and a changed
# metrics.patterns is refused naming it; a folder whose keys an older sweep
# made is refused with a message that says so.
. tests/lib.sh
cd "$T_TMP" || exit 1

# two model files of one size and one first MiB that differ near the end
head -c 2097152 /dev/urandom >m1.bin
cp m1.bin m2.bin
printf 'XXXXXXXX' | dd of=m2.bin bs=1 seek=2000000 conv=notrunc 2>/dev/null
cp m1.bin model.bin
check_eq "the two models share size and first MiB" \
    "$(wc -c <m2.bin) $(head -c 1048576 m2.bin | cksum)" "$(wc -c <m1.bin) $(head -c 1048576 m1.bin | cksum)"

exp() { # FILE GRID [KEY=VALUE...]
    local f=$1 g=$2
    shift 2
    make_experiment fakeserver "$f" NAME=resume PIDFILE="$T_TMP/srv.pid" OUTPUT_LEN=4 STEP_A=1 PREFILL=1 \
        GRID="$g" SERVER_LINES="  model: $T_TMP/model.bin" "$@"
}
exp e.yaml '["1:2", "2:2"]'
"$SWEEP" run e.yaml --out run >o.txt 2>e.txt
check_eq "first run: exit 0" "$?" 0
check_eq "first run: 2 ok rows" "$(col run status | tr '\n' ' ')" "ok ok "
check "the manifest records the key recipe" grep -q '"key_recipe": 3' run/manifest.json
check "the model's whole-file sha256 is cached" grep -q "^$(sha256sum <model.bin | cut -c1-64) .* $T_TMP/model.bin\$" cache/model-sha256

# ---- W3-H1: a model changed past its first MiB is not the same model ----
cp m2.bin model.bin
"$SWEEP" run e.yaml --resume run >o.txt 2>e.txt
check_eq "model changed past the first MiB: --resume refused (exit 2)" "$?" 2
check "model changed past the first MiB: names the model file" \
    grep -q "the model file '$T_TMP/model.bin' is not the one its points ran with" e.txt
cp m1.bin model.bin
"$SWEEP" run e.yaml --resume run >o.txt 2>e.txt
check_eq "the same model again: --resume runs nothing, exit 0" "$?" 0
check "the same model again: both points already ok" grep -q "2 of 2 points already ok" e.txt

# ---- W3-N7: points.csv rebuilt from the logs by sweep plot ----
rm run/points.csv
"$SWEEP" plot run --no-preview >/dev/null 2>&1
check_eq "sweep plot rebuilt points.csv from the logs: keys empty" "$(col run key | tr '\n' ' ')" "  "
"$SWEEP" run e.yaml --resume run >o.txt 2>e.txt
check_eq "resume of the rebuilt folder: exit 0" "$?" 0
check "resume of the rebuilt folder: no ok point is rerun" test ! -e run/default/c1-n2.log.1 -a ! -e run/default/c2-n2.log.1
check "resume of the rebuilt folder: says the rows took their keys" grep -q "2 ok row(s) without a key" e.txt
check_eq "resume of the rebuilt folder: the rows have their keys again" "$(col run key | grep -c .)" 2
# a rebuilt folder whose model changed since: refused, naming it
rm run/points.csv
"$SWEEP" plot run --no-preview >/dev/null 2>&1
cp m2.bin model.bin
"$SWEEP" run e.yaml --resume run >o.txt 2>e.txt
check_eq "rebuilt folder, model changed: refused (exit 2)" "$?" 2
check "rebuilt folder, model changed: says the row has no key and names the model" \
    grep -q "has no key .*the model file '$T_TMP/model.bin'" e.txt
cp m1.bin model.bin
"$SWEEP" run e.yaml --resume run >/dev/null 2>&1

# ---- W3-H2: sweep plot's saved pattern reads the new points too ----
"$SWEEP" plot run --no-preview --pattern 'conc_x=Concurrency:\s+([0-9.]+)' >/dev/null 2>&1
check_eq "sweep plot --pattern: the old rows have the column" "$(col run conc_x | grep -c .)" 2
exp e3.yaml '["1:2", "2:2", "3:3"]'
"$SWEEP" run e3.yaml --resume run >o.txt 2>e.txt
check_eq "resume adding a point after plot --pattern: exit 0" "$?" 0
check_eq "the added point is read with the saved pattern too" "$(col run conc_x | grep -c .)" 3
exp p.yaml '["1:2", "2:2", "3:3"]' EXTRA='metrics: {patterns: {conc_y: "Concurrency:\\s+([0-9.]+)"}}'
"$SWEEP" run p.yaml --resume run >o.txt 2>e.txt
check_eq "metrics.patterns changed: --resume refused (exit 2)" "$?" 2
check "metrics.patterns changed: names the rule" grep -q "variant 'default': metrics.patterns differs" e.txt
exp s.yaml '["1:2", "2:2", "3:3"]' EXTRA='metrics: {preset: vllm}'
"$SWEEP" run s.yaml --resume run >o.txt 2>e.txt
check_eq "metrics.preset changed: --resume refused (exit 2)" "$?" 2
check "metrics.preset changed: names the rule" grep -q "variant 'default': metrics.preset differs" e.txt

# ---- W3-N6: the builtin client; raising bench.repeat adds repeats ----
write_b() { # FILE [BENCH_LINE...]: the builtin client on fakeserver
    local f=$1
    shift
    {
        cat <<YAML
name: builtin
server:
  engine: command
  command: ["$FAKESERVER", --port, "\${port}", --pid-file, "$T_TMP/srv.pid"]
  flags: {step-a-ms: 1, step-b-ms: 0, prefill-ms: 1}
bench:
  warmup: 0
  output_len: 4
  grid: ["1:2"]
YAML
        for line in "$@"; do echo "  $line"; done
    } >"$f"
}
write_b r1.yaml
"$SWEEP" run r1.yaml --out rep >/dev/null 2>&1
check_eq "repeat 1: exit 0" "$?" 0
write_b r2.yaml "repeat: 2"
"$SWEEP" run r2.yaml --resume rep >o.txt 2>e.txt
check_eq "repeat raised to 2: exit 0" "$?" 0
check "repeat raised to 2: says it adds one point" grep -q "adding 1 point" e.txt
check_eq "repeat raised to 2: two ok rows, repeats 1 and 2" \
    "$(col rep repeat | tr '\n' ' ')/$(col rep status | tr '\n' ' ')" "1 2 /ok ok "
check "repeat raised to 2: repeat 1 was not rerun" test ! -e rep/default/c1-n2.log.1 -a -e rep/default/c1-n2-r2.log

check "recipe 3: repeat 2 draws its own prompts" grep -q "seed 43\$" rep/default/c1-n2-r2.log
# a folder of recipe 2 (every repeat drew the same prompts): repeat 1's key
# is what it was, so only a repeat row is refused, saying why
cp -r rep rep2
sed -i 's/"key_recipe": 3/"key_recipe": 2/' rep2/manifest.json
sed -i '/-r2\.log/s/,ok,[0-9a-f]\{16\},/,ok,0123456789abcdef,/' rep2/points.csv
"$SWEEP" run r2.yaml --resume rep2 >o.txt 2>e.txt
check_eq "recipe-2 folder with a repeat: --resume refused (exit 2)" "$?" 2
check "recipe-2 folder with a repeat: says each repeat draws its own prompts" \
    grep -q "key recipe 2; this one makes recipe 3: each repeat of the builtin client draws its own prompts" e.txt
rm -rf rep1 && "$SWEEP" run r1.yaml --out rep1 >/dev/null 2>&1
sed -i 's/"key_recipe": 3/"key_recipe": 2/' rep1/manifest.json
"$SWEEP" run r1.yaml --resume rep1 >o.txt 2>e.txt
check_eq "recipe-2 folder without repeats: --resume keeps its rows (exit 0)" "$?" 0
check "recipe-2 folder without repeats: nothing rerun" grep -q "1 of 1 points already ok" e.txt

# ---- W3-N6: a changed dataset is named as the cause ----
printf '%s\n' '{"prompt": "one two three"}' '{"prompt": "four five"}' >data.jsonl
write_b d.yaml "dataset: {kind: jsonl, path: $T_TMP/data.jsonl}"
"$SWEEP" run d.yaml --out ds >/dev/null 2>&1
check_eq "dataset run: exit 0" "$?" 0
printf '%s\n' '{"prompt": "six seven"}' >>data.jsonl
"$SWEEP" run d.yaml --resume ds >o.txt 2>e.txt
check_eq "dataset changed: --resume refused (exit 2)" "$?" 2
check "dataset changed: names the dataset file, not the model" \
    grep -q "the dataset file '$T_TMP/data.jsonl' changed" e.txt

# ---- keys of an older sweep (no key_recipe in manifest.json) ----
exp e.yaml '["1:2", "2:2"]'
"$SWEEP" run e.yaml --out old >/dev/null 2>&1
# what an older sweep leaves: no key_recipe, keys made another way
sed -i '/"key_recipe"/d' old/manifest.json
sed -i 's/,ok,[0-9a-f]\{16\},/,ok,0123456789abcdef,/' old/points.csv
"$SWEEP" run e.yaml --resume old >o.txt 2>e.txt
check_eq "keys of an older sweep: --resume refused (exit 2)" "$?" 2
check "keys of an older sweep: says so" grep -q "point keys were made by an older sweep (key recipe 1" e.txt
"$SWEEP" plot old --no-preview >/dev/null 2>&1
check_eq "keys of an older sweep: sweep plot still reads the folder" "$?" 0
check_eq "no server left" "$(procs_with "$T_TMP/srv.pid")" 0
finish
