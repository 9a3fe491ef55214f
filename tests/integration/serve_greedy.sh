# serve_greedy: greedy completions through `fp4serve serve` are identical,
# byte for byte, to `fp4serve generate`: one request at a time, and inside a
# batch of 16 concurrent requests (half streamed, half not); on the tiny
# synthetic model, and on SmolLM2 (completions and chat) when it is present.
# Seeded sampling gives the same text alone and inside the batch.
. tests/lib.sh
need jq

# run_model MODEL N PROMPTS...: the checks above for one model.
run_model() {
    local model=$1 ntok=$2 name i p j q body pids bad steps seqs steps0 seqs0 cmd
    shift 2
    name=$(basename "$model")
    i=0
    for p in "$@"; do
        gen_text "$model" "$p" "$ntok" --threads 1 >"$T_TMP/want.$i"
        i=$((i + 1))
    done
    start_serve "$model" --threads 2 --max-batch 16 --prefill-chunk 16 || {
        fail "$name: server start"
        return
    }
    # one at a time, streamed and not
    i=0
    for p in "$@"; do
        body=$(jq -cn --arg p "$p" --argjson n "$ntok" '{prompt: $p, max_tokens: $n, temperature: 0}')
        post /v1/completions "$body" | jq -j '.choices[0].text' >"$T_TMP/got.$i"
        check "$name: C=1 '$p' = generate" cmp -s "$T_TMP/want.$i" "$T_TMP/got.$i"
        body=$(echo "$body" | jq -c '. + {stream: true}')
        post /v1/completions "$body" | stream_text >"$T_TMP/got.$i"
        check "$name: C=1 streamed '$p' = generate" cmp -s "$T_TMP/want.$i" "$T_TMP/got.$i"
        i=$((i + 1))
    done
    # 16 at once: every prompt twice, once streamed and once not
    steps0=$(metric fp4serve_steps_total)
    seqs0=$(metric fp4serve_step_sequences_total)
    # one curl sends all 16 at once (-Z), so they meet in the scheduler
    set -- "$@" "$@" # 8 prompts, twice
    i=0
    for p in "$@"; do
        jq -cn --arg p "$p" --argjson n "$ntok" --argjson s "$([ $i -lt 8 ] && echo false || echo true)" \
            '{prompt: $p, max_tokens: $n, temperature: 0, stream: $s}' >"$T_TMP/body.$i"
        i=$((i + 1))
    done
    cmd=(curl -s -N -Z --parallel-immediate --parallel-max 16)
    i=0
    while [ $i -lt 16 ]; do
        [ $i -gt 0 ] && cmd+=(--next)
        cmd+=(-s -N -H Content-Type:application/json --data-binary "@$T_TMP/body.$i" -o "$T_TMP/raw.$i")
        cmd+=("$SRV_URL/v1/completions")
        i=$((i + 1))
    done
    "${cmd[@]}"
    i=0
    while [ $i -lt 16 ]; do
        if [ $i -lt 8 ]; then
            jq -j '.choices[0].text' "$T_TMP/raw.$i" >"$T_TMP/batch.$i"
        else
            stream_text <"$T_TMP/raw.$i" >"$T_TMP/batch.$i"
        fi
        i=$((i + 1))
    done
    i=0
    bad=0
    while [ $i -lt 16 ]; do
        cmp -s "$T_TMP/want.$((i % 8))" "$T_TMP/batch.$i" || bad=$((bad + 1))
        i=$((i + 1))
    done
    check_eq "$name: C=16 batch: requests whose text differs from generate" "$bad" "0"
    steps=$(($(metric fp4serve_steps_total) - steps0))
    seqs=$(($(metric fp4serve_step_sequences_total) - seqs0))
    check "$name: C=16 batch shared steps (mean batch $seqs/$steps > 2)" [ $((seqs)) -gt $((2 * steps)) ]
    # seeded sampling: the same seed gives the same text alone and in a batch
    body=$(jq -cn --arg p "$1" --argjson n "$ntok" \
        '{prompt: $p, max_tokens: $n, temperature: 0.9, top_p: 0.95, seed: 1234, ignore_eos: true}')
    post /v1/completions "$body" | jq -j '.choices[0].text' >"$T_TMP/seed.alone"
    pids=""
    for j in 1 2 3 4 5 6 7; do
        post /v1/completions "$(echo "$body" | jq -c ".seed = $j")" |
            jq -j '.choices[0].text' >"$T_TMP/seed.$j" &
        pids="$pids $!"
    done
    post /v1/completions "$body" | jq -j '.choices[0].text' >"$T_TMP/seed.batch"
    wait $pids
    check "$name: seeded sampling alone = in a batch" cmp -s "$T_TMP/seed.alone" "$T_TMP/seed.batch"
    if [ -f "$SMOL" ] && [ "$model" = "$SMOL" ]; then
        # chat: the model's ChatML template with its default system prompt
        q="What is the capital of France?"
        gen_text "$model" "$q" "$ntok" --threads 1 --chat >"$T_TMP/want.chat"
        body=$(jq -cn --arg q "$q" --argjson n "$ntok" \
            '{messages: [{role: "user", content: $q}], max_tokens: $n, temperature: 0}')
        post /v1/chat/completions "$body" | jq -j '.choices[0].message.content' >"$T_TMP/got.chat"
        check "$name: chat = generate --chat" cmp -s "$T_TMP/want.chat" "$T_TMP/got.chat"
        post /v1/chat/completions "$(echo "$body" | jq -c '. + {stream: true}')" |
            stream_text >"$T_TMP/got.chat"
        check "$name: streamed chat = generate --chat" cmp -s "$T_TMP/want.chat" "$T_TMP/got.chat"
        check "$name: another seed gives another sample" \
            sh -c "! cmp -s '$T_TMP/seed.alone' '$T_TMP/seed.1'"
    fi
    stop_serve
    check_eq "$name: server exits 0 on SIGTERM" "$?" "0"
}

run_model "$(tiny_model)" 200 "Hello world" "the cat sat on the mat" "1 2 3" "a" \
    "tokens and more tokens" "<|im_start|>user" "x y z" "unicode é ü"
if [ -f "$SMOL" ]; then
    run_model "$SMOL" 24 "The capital of France is" "Once upon a time" "def fibonacci(n):" \
        "1, 2, 3, 4," "The quick brown fox" "Water boils at" "In 1492," "My favourite food is"
else
    echo "skip: $SMOL not present (make models) - SmolLM2 checks not run"
fi
finish
