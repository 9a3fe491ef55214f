# serve_logprobs: what evaluation and benchmark clients ask of `fp4serve
# serve` beyond plain text. Echoed prompt logprobs sum to `fp4serve eval`'s
# negative log-likelihood over the same text (1e-4 per token); a small
# multiple-choice set (tests/fixtures/mc) scored with the request shape of
# lm-evaluation-harness's local-completions (token-id prompts batched, echo,
# logprobs 1, max_tokens 1, temperature 0) picks the same answers, with the
# same scores, as `fp4serve eval` offline; n = 4 with a seed repeats and
# choice j is the single request seeded seed + j; 8 prompts in one request
# equal 8 single requests; logprobs leave greedy text unchanged and streamed
# logprobs equal the body's; SGLang's /generate (cumulative text); OpenAI's
# error codes and vLLM's /v1/models fields. On the tiny synthetic model, and
# the eval check also on SmolLM2 when it is present.
. tests/lib.sh
need jq

# eval_sum MODEL FILE: eval's total NLL over FILE (mean nll x predictions) and
# the prediction count, "SUM N"
eval_sum() {
    "$FP4SERVE" eval --model "$1" --text "$2" --threads 1 --ctx 256 2>/dev/null | tail -n 1 |
        jq -r '"\(.nll * .scored) \(.scored)"'
}
# echo_sum FILE: minus the sum of the server's echoed prompt logprobs over
# FILE's text (the first is null), and their count, "SUM N"
echo_sum() {
    post /v1/completions "$(jq -cn --rawfile p "$1" '{prompt: $p, echo: true, logprobs: 0, max_tokens: 0}')" |
        jq -r '.choices[0].logprobs.token_logprobs | "\(-([.[1:][]] | add)) \(length - 1)"'
}
# check_echo_eval NAME MODEL FILE: the sums agree to 1e-4 per token
check_echo_eval() {
    local e s
    e=$(eval_sum "$2" "$3")
    s=$(echo_sum "$3")
    check_eq "$1: echo scores as many tokens as eval" "${s#* }" "${e#* }"
    check "$1: echoed prompt logprobs = eval NLL ($s vs $e)" within "${s% *}" "${e% *}" "$(awk -v n="${e#* }" 'BEGIN { print n * 1e-4 }')"
}
# ids MODEL TEXT: the token ids fp4serve tokenizes TEXT into, as a JSON list
ids() {
    "$FP4SERVE" generate --model "$1" --prompt "$2" -n 1 --threads 1 2>/dev/null |
        sed -n 's/^prompt ids: //p' | tail -n 1 | jq -Rc 'split(" ") | map(tonumber)'
}

model=$(tiny_model)
printf 'The quick brown fox jumps over the lazy dog. It was a sunny day, and the fox was happy.' >"$T_TMP/text.txt"
start_serve "$model" --threads 1 --max-batch 4 --prefill-chunk 16 || {
    fail "server start"
    finish
    exit
}

# ---- echo = eval ----
check_echo_eval tiny "$model" "$T_TMP/text.txt"

# ---- a multiple-choice set, lm-evaluation-harness's way and offline ----
right_srv=0 right_off=0 same=0 n_items=0
while IFS= read -r item; do
    ctx=$(echo "$item" | jq -r .context)
    answer=$(echo "$item" | jq -r .answer)
    cids=$(ids "$model" "$ctx")
    ctxlen=$(echo "$cids" | jq length)
    printf '%s' "$ctx" >"$T_TMP/ctx.txt"
    off_ctx=$(eval_sum "$model" "$T_TMP/ctx.txt")
    reqs="[]" offline=""
    for k in 0 1 2 3; do
        cont=$(echo "$item" | jq -r ".choices[$k]")
        whole=$(ids "$model" "$ctx$cont")
        # lm-eval splits context + continuation at len(encode(context))
        check "mc: '$ctx$cont' starts with the context's tokens" \
            jq -en --argjson a "$cids" --argjson b "$whole" '$b[:($a | length)] == $a'
        reqs=$(jq -cn --argjson r "$reqs" --argjson w "$whole" '$r + [$w]')
        printf '%s' "$ctx$cont" >"$T_TMP/whole.txt"
        off=$(eval_sum "$model" "$T_TMP/whole.txt")
        offline="$offline $(awk -v a="${off% *}" -v b="${off_ctx% *}" 'BEGIN { printf "%.6f", b - a }')"
    done
    body=$(jq -cn --argjson p "$reqs" '{model: "tiny", prompt: $p, max_tokens: 1, temperature: 0, logprobs: 1, seed: 1234, echo: true}')
    post /v1/completions "$body" >"$T_TMP/mc.json"
    # lm-eval: sum(token_logprobs[ctxlen:-1]); is_greedy: each == max(top_logprobs)
    served=$(jq -r --argjson c "$ctxlen" '[.choices | sort_by(.index)[] | .logprobs.token_logprobs[$c:-1] | add] | map(tostring) | join(" ")' "$T_TMP/mc.json")
    check "mc: lm-eval's is_greedy test reads the body" \
        jq -e --argjson c "$ctxlen" '[.choices[].logprobs | [.token_logprobs[$c:-1], (.top_logprobs[$c:-1] | map([.[]] | max))] | transpose[] | .[0] <= .[1]] | all' "$T_TMP/mc.json"
    pick() { echo "$1" | awk '{ b = 1; for (i = 2; i <= NF; i++) if ($i > $b) b = i; print b - 1 }'; }
    ps=$(pick "$served")
    po=$(pick "$offline")
    close=$(awk -v a="$served" -v b="$offline" 'BEGIN { n = split(a, x, " "); split(b, y, " "); ok = 1
        for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-3) ok = 0 } print ok }')
    check "mc: '$ctx' scores through the server = offline ($served | $offline)" [ "$close" = 1 ]
    [ "$ps" = "$answer" ] && right_srv=$((right_srv + 1))
    [ "$po" = "$answer" ] && right_off=$((right_off + 1))
    [ "$ps" = "$po" ] && same=$((same + 1))
    n_items=$((n_items + 1))
done <tests/fixtures/mc/items.jsonl
check_eq "mc: the fixture's 14 items were scored" "$n_items" 14
check_eq "mc: every item picks the same choice through the server as offline" "$same" "$n_items"
check_eq "mc: accuracy through the server = offline ($right_srv/$n_items)" "$right_srv" "$right_off"

# ---- n = 4 with a seed ----
nbody='{"prompt":"Once upon a time","n":4,"seed":7,"temperature":1,"max_tokens":12,"ignore_eos":true}'
e2e() { metric 'fp4serve_e2e_request_latency_seconds_count{model_name="tiny"}'; }
e0=$(e2e)
post /v1/completions "$nbody" | jq -c '[.choices[] | [.index, .text]]' >"$T_TMP/n1"
check_eq "n=4: one request served in /metrics' histograms" "$(e2e)" "$((e0 + 1))"
post /v1/completions "$nbody" | jq -c '[.choices[] | [.index, .text]]' >"$T_TMP/n2"
check "n=4: four choices" jq -e 'length == 4 and (map(.[0]) == [0, 1, 2, 3])' "$T_TMP/n1"
check "n=4 with a seed: the same four choices again" cmp -s "$T_TMP/n1" "$T_TMP/n2"
check "n=4: the choices differ" jq -e 'map(.[1]) | unique | length > 1' "$T_TMP/n1"
for j in 0 1 2 3; do
    one=$(post /v1/completions "$(echo "$nbody" | jq -c ".n = 1 | .seed = $((7 + j))")" | jq -c '.choices[0].text')
    check_eq "n=4: choice $j = the single request with seed 7+$j" "$(jq -c ".[$j][1]" "$T_TMP/n1")" "$one"
done

# ---- 8 prompts in one request = 8 single requests ----
prompts='["one","two words","the cat","a b c","hello","x y z","tokens and more","end"]'
for mode in 0 0.8; do
    batch=$(jq -cn --argjson p "$prompts" --argjson t "$mode" '{prompt: $p, max_tokens: 10, temperature: $t, seed: 3, ignore_eos: true}')
    post /v1/completions "$batch" | jq -c '[.choices | sort_by(.index)[] | .text]' >"$T_TMP/b8"
    : >"$T_TMP/s8"
    for i in 0 1 2 3 4 5 6 7; do
        post /v1/completions "$(echo "$batch" | jq -c ".prompt = .prompt[$i]")" | jq -c '.choices[0].text' >>"$T_TMP/s8"
    done
    check "8 prompts in one request (temperature $mode) = 8 single requests" \
        [ "$(jq -c . "$T_TMP/b8")" = "$(jq -cs . "$T_TMP/s8")" ]
done

# ---- logprobs leave greedy text alone; streamed logprobs = the body's ----
g='{"prompt":"hello world","max_tokens":16,"temperature":0,"ignore_eos":true}'
plain=$(post /v1/completions "$g" | jq -c '.choices[0].text')
post /v1/completions "$(echo "$g" | jq -c '.logprobs = 5')" >"$T_TMP/lp.json"
check_eq "greedy text with logprobs = without" "$(jq -c '.choices[0].text' "$T_TMP/lp.json")" "$plain"
# (alternatives whose text is the same, such as two partial characters shown
# as U+FFFD, are one key: the likelier is kept)
check "logprobs: 16 tokens, up to 5 alternatives each, text_offset rising" jq -e '.choices[0].logprobs |
    (.tokens | length) == 16 and (.top_logprobs | all(length >= 1 and length <= 5)) and
    (.text_offset == (.text_offset | sort))' "$T_TMP/lp.json"
check "logprobs: the tokens spell the text" jq -e '.choices[0] | (.logprobs.tokens | join("")) == .text' "$T_TMP/lp.json"
post /v1/completions "$(echo "$g" | jq -c '.logprobs = 5 | .stream = true')" | sed -n 's/^data: //p' | grep -v '^\[DONE\]$' |
    jq -c '.choices[0].logprobs | select(. != null) | .token_logprobs[]' | jq -cs . >"$T_TMP/slp"
check "streamed logprobs = the body's" [ "$(jq -c '.choices[0].logprobs.token_logprobs' "$T_TMP/lp.json")" = "$(cat "$T_TMP/slp")" ]
post /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":0,"ignore_eos":true,"logprobs":true,"top_logprobs":3}' >"$T_TMP/chat.json"
check "chat logprobs: content[] spells the message, 3 alternatives with bytes" jq -e '.choices[0] |
    ([.logprobs.content[].token] | join("")) == .message.content and
    (.logprobs.content | all((.top_logprobs | length) == 3 and (.bytes | type) == "array"))' "$T_TMP/chat.json"

# ---- SGLang's /generate ----
gbody='{"text":"hello world","sampling_params":{"max_new_tokens":16,"temperature":0,"ignore_eos":true},"stream":true,"return_logprob":false,"logprob_start_len":-1,"lora_path":null}'
post /generate "$gbody" >"$T_TMP/gen.sse"
check "generate: stream ends with [DONE]" [ "$(grep '^data:' "$T_TMP/gen.sse" | tail -n 1)" = "data: [DONE]" ]
last=$(sed -n 's/^data: //p' "$T_TMP/gen.sse" | grep -v '^\[DONE\]$' | tail -n 1)
check_eq "generate: the last event's text (cumulative) = completions' text" "$(echo "$last" | jq -c .text)" "$plain"
check_eq "generate: meta_info.completion_tokens" "$(echo "$last" | jq .meta_info.completion_tokens)" 16
check "generate: each event's text extends the previous" sh -c "sed -n 's/^data: //p' '$T_TMP/gen.sse' | grep -v DONE |
    jq -s -e '[.[].text] as \$t | [range(1; \$t | length) as \$i | \$t[\$i] | startswith(\$t[\$i - 1])] | all' >/dev/null"
check_eq "generate: not streamed, the same text" "$(post /generate "$(echo "$gbody" | jq -c '.stream = false')" | jq -c .text)" "$plain"

# ---- OpenAI's error codes, vLLM's model fields ----
post /v1/completions '{"prompt":"x","max_tokens":100000}' >"$T_TMP/err.json"
check_eq "context overflow: code context_length_exceeded" "$(jq -r .error.code "$T_TMP/err.json")" context_length_exceeded
check_eq "unknown model: code model_not_found" "$(post /v1/completions '{"prompt":"x","model":"gpt-4"}' | jq -r .error.code)" model_not_found
curl -s "$SRV_URL/v1/models" >"$T_TMP/models.json"
check "/v1/models: root, parent null, max_model_len" jq -e '.data[0] | .root == .meta.path and .parent == null and .max_model_len == 256' "$T_TMP/models.json"
stop_serve

if [ -f "$SMOL" ]; then
    start_serve "$SMOL" --threads 2 --max-batch 2 --prefill-chunk 64 || fail "SmolLM2: server start"
    check_echo_eval SmolLM2 "$SMOL" "$T_TMP/text.txt"
    stop_serve
else
    echo "skip: $SMOL not present (make models) - the SmolLM2 eval check not run"
fi
finish
