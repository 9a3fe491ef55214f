# fakeserver.sh: the test double keeps the timing it documents. Four
# concurrent streams of 20 tokens with a=20, b=2 ms must see a server-side
# TPOT of a + 4b = 28 ms, plus at most one step of joining delay spread over
# 19 gaps (so 28 to 29.5 ms), and a TTFT of the prefill time; faults behave.
# The upper bounds allow 2 ms of scheduling delay: this machine is shared,
# and the double measures its truth server-side, so clients compare against
# what it actually did.
. tests/lib.sh

port=$(free_port)
"$FAKESERVER" --port "$port" --step-a-ms 20 --step-b-ms 2 --prefill-ms 10 2>"$T_TMP/fs.log" &
track_pid $!
wait_http "http://127.0.0.1:$port/health" 5 || fail "fakeserver did not come up"
body='{"prompt":[1,2,3],"max_tokens":20,"stream":true,"stream_options":{"include_usage":true}}'
for i in 1 2 3 4; do
    curl -sN "http://127.0.0.1:$port/v1/completions" -d "$body" >"$T_TMP/s$i.txt" &
done
sleep 1.2
stats=$(curl -s "http://127.0.0.1:$port/stats")
tpot=$(echo "$stats" | sed 's/.*"median_tpot_ms":\([0-9.]*\).*/\1/')
ttft=$(echo "$stats" | sed 's/.*"median_ttft_ms":\([0-9.]*\).*/\1/')
check "4 streams: median TPOT $tpot ms is in [28, 29.5] (+2 ms noise)" awk -v v="$tpot" 'BEGIN{exit !(v >= 27.9 && v <= 31.5)}'
check "prefill: median TTFT $ttft ms is 10, never less (+20 ms noise allowed)" awk -v v="$ttft" 'BEGIN{exit !(v >= 10 && v < 30)}'
check "every stream has 20 token events" test "$(grep -c '"text":" tok"' "$T_TMP/s1.txt")" = 20
check "the last token carries finish_reason length" grep -q '"finish_reason":"length"' "$T_TMP/s1.txt"
check "usage chunk has choices []" grep -q '"choices":\[\],"usage":{"prompt_tokens":3,"completion_tokens":20' "$T_TMP/s1.txt"
check "stream ends with [DONE]" test "$(tail -n 2 "$T_TMP/s1.txt" | head -n 1)" = "data: [DONE]"

second=$("$FAKESERVER" --port "$port" 2>&1)
check_eq "a second server on the same port exits 1" "$?" 1
check "and says address already in use" sh -c "echo '$second' | grep -q 'address already in use'"

port2=$(free_port)
"$FAKESERVER" --port "$port2" --close-after 2 2>/dev/null &
track_pid $!
wait_http "http://127.0.0.1:$port2/health" 5
out=$(curl -sN "http://127.0.0.1:$port2/v1/completions" -d '{"max_tokens":5,"stream":true}')
check "close-after: no [DONE]" sh -c "! echo '$out' | grep -q DONE"
check_eq "close-after: 2 events" "$(echo "$out" | grep -c '^data:')" 2
finish
