# loadgen_rate.sh: open-loop arrivals. The achieved arrival rate ((sent - 1)
# over the first-to-last send span) is within 3% of the offered rate from 1
# to 200 req/s with constant arrivals (--rate-kind constant), and with
# Poisson arrivals within 3% of the seeded schedule's own rate (a Poisson
# sample of a few hundred arrivals differs from the offered rate by chance,
# not by the client). fakeserver answers in a few ms, so the cap of 64 in
# flight is never reached.
. tests/lib.sh
start_fake --step-a-ms 1 --step-b-ms 0 --prefill-ms 1

rate_of() { # FILE FIELD: (n - 1) / span of FIELD over the measured records, req/s
    python3 -c "
import json, sys
t = [json.loads(l)['$2'] for l in open('$1') if not json.loads(l)['warmup']]
print((len(t) - 1) / ((max(t) - min(t)) / 1e3))"
}

for spec in 1:4 20:41 200:401; do
    r=${spec%%:*} n=${spec#*:}
    bench -c 64 -n "$n" --output-len 2 --warmup 0 --request-rate "$r" --rate-kind constant \
        --jsonl "$T_TMP/r$r.jsonl"
    check_eq "constant $r req/s: exit 0" "$rc" 0
    a=$(bench_value 'Achieved request rate (req/s):' "$T_TMP/out")
    check "constant $r req/s: achieved $a within 3%" within "$a" "$r" 0.03 rel
    a=$(rate_of "$T_TMP/r$r.jsonl" sent_ms)
    check "constant $r req/s: from the records $a within 3%" within "$a" "$r" 0.03 rel
done
check "constant arrivals are named in the header" grep -q "open loop (constant)" "$T_TMP/out"

bench -c 64 -n 401 --output-len 2 --warmup 0 --request-rate 200 --jsonl "$T_TMP/p.jsonl"
check_eq "poisson 200 req/s: exit 0" "$rc" 0
s=$(rate_of "$T_TMP/p.jsonl" intended_ms)
a=$(rate_of "$T_TMP/p.jsonl" sent_ms)
check "poisson 200 req/s: achieved $a within 3% of the schedule's $s" within "$a" "$s" 0.03 rel
check "poisson: the schedule is near the offered rate ($s)" within "$s" 200 0.25 rel

bench -c 4 -n 4 --request-rate 5 --rate-kind uniform
check_eq "an unknown --rate-kind: exit 2" "$rc" 2
check "an unknown --rate-kind is named" grep -q "option '--rate-kind' wants poisson or constant, got 'uniform'" "$T_TMP/err"
stop_fake
finish
