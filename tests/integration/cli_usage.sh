# cli_usage.sh: the command line as a user meets it. `sweep help X` is
# `sweep X --help`; every usage line names every flag of the command's
# flag table (the "options:" list is printed from that table, so the two
# cannot drift apart unnoticed); a bad flag value is a usage error (2),
# found before anything is contacted or read, never an environment error (3).
. tests/lib.sh
cd "$T_TMP" || exit 1

commands="run check bench extract plot compare import"

# ---- help ----
for c in $commands; do
    "$SWEEP" help "$c" >help.out 2>&1
    check_eq "sweep help $c exits 0" "$?" 0
    "$SWEEP" "$c" --help >flag.out 2>&1
    check "sweep help $c prints what sweep $c --help prints" cmp -s help.out flag.out
    check "sweep help $c is $c's own usage" grep -q "^usage: sweep $c " help.out
done
"$SWEEP" help >top.out 2>&1
check_eq "sweep help alone exits 0" "$?" 0
check "sweep help alone lists the commands" grep -q '^  compare ' top.out
"$SWEEP" help nosuch >/dev/null 2>err.out
check_eq "sweep help of an unknown command exits 2" "$?" 2
check "and names it" grep -q "unknown command 'nosuch'" err.out

# ---- usage lines against the flag tables ----
for c in $commands; do
    "$SWEEP" "$c" --help >h.out 2>&1
    # the synopsis runs from "usage:" to the first blank line
    synopsis=$(sed -n '1,/^$/p' h.out)
    flags=$(sed -n '/^options:/,$p' h.out | grep -oE '^ +(-[a-z], )?--[a-z-]+' |
        sed 's/^ *//; s/^-[a-z], //' | grep -v '^--help$')
    check "sweep $c --help lists options" [ -n "$flags" ]
    for f in $flags; do
        short=$(grep -oE "^  -[a-z], $f( |$)" h.out | sed 's/^  \(-[a-z]\),.*/\1/')
        if printf '%s\n' "$synopsis" | grep -qE -- "(^|[ [])($f|${short:-$f})([] =.]|$)"; then
            ok "sweep $c usage names $f"
        else
            fail "sweep $c usage line leaves out $f"
        fi
    done
done

# ---- unknown flags and bad numbers are usage errors (2) in every command ----
for c in $commands; do
    "$SWEEP" "$c" --no-such-flag "$T_TMP/none" >/dev/null 2>err </dev/null
    check_eq "sweep $c --no-such-flag: exit 2" "$?" 2
    check "sweep $c --no-such-flag: named" grep -q "unknown option '--no-such-flag'" err
done

# ---- sweep status (no flags of its own): help, unknown flag, no folder ----
"$SWEEP" help status >help.out 2>&1
check_eq "sweep help status exits 0" "$?" 0
check "sweep help status is status's own usage" grep -q "^usage: sweep status RUN_DIR" help.out
"$SWEEP" status --no-such-flag "$T_TMP/none" >/dev/null 2>err </dev/null
check_eq "sweep status --no-such-flag: exit 2" "$?" 2
"$SWEEP" status "$T_TMP" >/dev/null 2>err </dev/null
check_eq "sweep status of a folder without a SLURM job: exit 2" "$?" 2
check "sweep status of a folder without a SLURM job: says so" grep -q "no slurm job recorded" err

# ---- bad values are usage errors (2), before anything is contacted ----
# bench_usage DESC ARGS...: exit 2, one line on stderr, and no request sent
bench_usage() {
    desc=$1
    shift
    "$SWEEP" bench "$@" >out 2>err
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l <err)" -eq 1 ] && ! grep -q "cannot reach" err; then
        ok "bench $desc: exit 2 ($(cat err))"
    else
        fail "bench $desc: want exit 2 and one line; got $rc: $(cat err)"
    fi
}
bench_usage "--url 'not a url'" --url 'not a url' -c 1 -n 1
bench_usage "--url without scheme" --url 127.0.0.1:30000 -c 1 -n 1
bench_usage "--url ftp://" --url ftp://127.0.0.1:30000 -c 1 -n 1
bench_usage "--url without host" --url http:// -c 1 -n 1
bench_usage "--url port 99999" --url http://127.0.0.1:99999 -c 1 -n 1
bench_usage "--url port 0" --url http://127.0.0.1:0 -c 1 -n 1
bench_usage "--url with a query" --url 'http://127.0.0.1:1/?a=b' -c 1 -n 1
bench_usage "--url empty" --url '' -c 1 -n 1
bench_usage "--endpoint not a path" --url http://127.0.0.1:1 -c 1 -n 1 --endpoint v1/completions
bench_usage "--model empty" --url http://127.0.0.1:1 -c 1 -n 1 --model ''
bench_usage "--jsonl empty" --url http://127.0.0.1:1 -c 1 -n 1 --jsonl ''
bench_usage "--prompt-text empty" --url http://127.0.0.1:1 -c 1 -n 1 --prompt-text=
bench_usage "-c not a number" --url http://127.0.0.1:1 -c 1x -n 1
bench_usage "-c 0" --url http://127.0.0.1:1 -c 0 -n 1
bench_usage "--request-rate nan" --url http://127.0.0.1:1 -c 1 -n 1 --request-rate nan
bench_usage "an unknown flag" --url http://127.0.0.1:1 -c 1 -n 1 --concurency 2
bench_usage "a stray argument" --url http://127.0.0.1:1 -c 1 -n 1 extra
check "the bad URL message names --url and the value" \
    sh -c "\"$SWEEP\" bench --url 'not a url' -c 1 -n 1 2>&1 | grep -q \"option '--url' wants .* got 'not a url'\""
# a well-formed URL nobody listens on stays an environment error
port=$(free_port)
"$SWEEP" bench --url "http://127.0.0.1:$port" -c 1 -n 1 --connect-timeout 1 >/dev/null 2>&1
check_eq "bench: a valid URL with no server is still exit 3" "$?" 3

# '' is never a value or an argument: "--out ''" made compare write
# /compare.md and /plots/ (the empty folder joined with a name). Each case
# here fails before anything could be written, whatever the binary.
usage_err() { # DESC ARGS...: exit 2 and a message naming the emptiness
    desc=$1
    shift
    "$SWEEP" "$@" >out 2>err </dev/null
    rc=$?
    if [ "$rc" -eq 2 ] && grep -q "must not be empty\|empty argument ''" err; then
        ok "$desc: exit 2 ($(head -n 1 err))"
    else
        fail "$desc: want exit 2 naming the empty value; got $rc: $(head -n 1 err)"
    fi
}
usage_err "compare --out ''" compare "$T_TMP/none-a" "$T_TMP/none-b" --out ''
usage_err "import --out ''" import "$T_TMP/none.log" --out ''
usage_err "run --out '' --dry-run" run "$T_TMP/none.yaml" --out '' --dry-run
usage_err "run --resume ''" run "$T_TMP/none.yaml" --resume ''
usage_err "extract --pattern ''" extract --pattern '' "$T_TMP/none.log"
usage_err "plot ''" plot ''
usage_err "check ''" check ''
usage_err "compare '' B" compare '' "$T_TMP/none-b"

# flags are checked before any file is read: a bad one is a usage error
# even when the folder or log is missing too
"$SWEEP" plot --preset nope "$T_TMP/none-run" >/dev/null 2>err
check_eq "plot --preset nope MISSING: exit 2" "$?" 2
check "plot --preset nope: names the preset" grep -q "unknown preset 'nope'" err
"$SWEEP" plot --pattern 'x=(' "$T_TMP/none-run" >/dev/null 2>err
check_eq "plot --pattern with a bad regex, MISSING: exit 2" "$?" 2
"$SWEEP" import --tag-regex '(' "$T_TMP/none.log" --out "$T_TMP/imp" >/dev/null 2>err
check_eq "import --tag-regex '(' MISSING: exit 2" "$?" 2

# a base URL with a trailing '/' works, and the header names the URL that
# was requested (it printed "...//v1/completions")
start_fake
"$SWEEP" bench --url "$url/" -c 1 -n 2 --output-len 2 --warmup 0 >bench.out 2>bench.err
check_eq "bench --url with a trailing '/': exit 0" "$?" 0
check "the header names $url/v1/completions" grep -qx "#sweep bench .*: $url/v1/completions" bench.out
stop_fake

# check: conflicting or empty flags are usage errors too
"$SWEEP" check --schema x.yaml >/dev/null 2>err
check_eq "check --schema with a file: exit 2" "$?" 2
"$SWEEP" check x.yaml --from '' >/dev/null 2>err
check_eq "check --from '': exit 2" "$?" 2
check "names --from" grep -q "'--from' must not be empty" err

# W3-N15: sweep's version and help to an unwritable stdout: exit 3, said
for args in "version" "--version" "--help" "help run" "run --help"; do
    # shellcheck disable=SC2086 # word splitting of args is meant
    "$SWEEP" $args >/dev/full 2>"$T_TMP/full.err"
    check_eq "sweep $args > /dev/full: exit 3" "$?" "3"
    check "sweep $args > /dev/full: says so" \
        grep -q 'output to stdout could not be written: No space left on device' "$T_TMP/full.err"
done
finish
