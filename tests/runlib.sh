# runlib.sh: helpers for the `sweep run` integration tests (tests/integration/run_*.sh),
# sourced after tests/lib.sh. Experiments there drive tests/fakeserver through real
# processes on 127.0.0.1; these helpers read the results and count processes.
# Absolute paths: the tests run sweep with their scratch folder as the working directory.
BUILD=$(cd "$BUILD" && pwd)
: "${CSVGET:=$BUILD/bin/csvget}" "${MINICLIENT:=$BUILD/bin/miniclient}"
SWEEP=$(cd "$(dirname "$SWEEP")" && pwd)/$(basename "$SWEEP")
FAKESERVER=$(cd "$(dirname "$FAKESERVER")" && pwd)/$(basename "$FAKESERVER")
CSVGET=$(cd "$(dirname "$CSVGET")" && pwd)/$(basename "$CSVGET")
MINICLIENT=$(cd "$(dirname "$MINICLIENT")" && pwd)/$(basename "$MINICLIENT")

# procs_with MARKER: how many live processes have MARKER in their command line
# (zombies have none). The marker is a path under $T_TMP, so only this test's
# processes count.
procs_with() {
    n=0
    for f in /proc/[0-9]*/cmdline; do
        [ "$f" = "/proc/$$/cmdline" ] && continue
        line=$( (tr '\0' ' ' <"$f") 2>/dev/null) || continue
        case "$line" in *"$1"*) n=$((n + 1)) ;; esac
    done
    echo "$n"
}

# wait_file PATH [SECONDS]: wait until PATH exists.
wait_file() {
    n=0
    while [ ! -e "$1" ] && [ $n -lt $(( ${2:-30} * 20 )) ]; do
        sleep 0.05
        n=$((n + 1))
    done
    [ -e "$1" ]
}

# col RUN_DIR COLUMN [ROW]: a points.csv cell (or the whole column).
col() { "$CSVGET" "$1/points.csv" "$2" ${3:+"$3"}; }
# rows RUN_DIR: number of rows in points.csv.
rows() { "$CSVGET" "$1/points.csv"; }

# miniclient_cmd: a bench.command list for the scripted client (fakeserver only).
miniclient_cmd() {
    echo "[\"$MINICLIENT\", --url, \"\${url}\", -c, \"\${concurrency}\", -n, \"\${prompts}\", --input-len, \"\${input_len}\", --output-len, \"\${output_len}\"]"
}
