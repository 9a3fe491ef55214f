#!/bin/sh
# deps.sh: make sure the Debian packages that sweep and fp4serve build and
# test with are present. As root with apt-get, missing ones are installed;
# otherwise the exact install command is printed and the script fails.
# Usage: scripts/deps.sh [--check]   (--check: report only, never install)
set -u

# pkg-config module or command -> Debian package
need_pc="yaml-0.1:libyaml-dev libcurl:libcurl4-openssl-dev libpcre2-8:libpcre2-dev
jansson:libjansson-dev libmicrohttpd:libmicrohttpd-dev"
need_cmd="pkg-config:pkg-config gnuplot:gnuplot-nox curl:curl cc:gcc make:make python3:python3"
# optional test tools, installed when possible, never required: the
# aarch64 cross compiler and qemu-user run the NEON kernel tests
# (tests/integration/engine_neon.sh); promtool lints /metrics
# (tests/integration/serve_metrics.sh)
want_cmd="aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu qemu-aarch64-static:qemu-user-static
promtool:prometheus"

missing=""
for pair in $need_cmd; do
    cmd=${pair%%:*} pkg=${pair#*:}
    command -v "$cmd" >/dev/null 2>&1 || missing="$missing $pkg"
done
if command -v pkg-config >/dev/null 2>&1; then
    for pair in $need_pc; do
        mod=${pair%%:*} pkg=${pair#*:}
        pkg-config --exists "$mod" 2>/dev/null || missing="$missing $pkg"
    done
else
    for pair in $need_pc; do missing="$missing ${pair#*:}"; done
fi
optional=""
for pair in $want_cmd; do
    cmd=${pair%%:*} pkg=${pair#*:}
    command -v "$cmd" >/dev/null 2>&1 || optional="$optional $pkg"
done
can_install=""
if [ "${1:-}" != "--check" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    can_install=1
fi
if [ -n "$optional" ]; then
    if [ -n "$can_install" ]; then
        echo "deps: installing optional Debian packages (NEON tests under qemu, promtool):$optional" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $optional >&2 ||
            echo "deps: note: could not install$optional; the tests that need them will be skipped" >&2
    else
        echo "deps: note: without$optional the tests that need them (NEON, promtool) are skipped" >&2
    fi
fi
[ -z "$missing" ] && exit 0

if [ -n "$can_install" ]; then
    echo "deps: installing missing Debian packages:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends $missing >&2; then
        apt-get update -q >&2 && apt-get install -y -q --no-install-recommends $missing >&2 || {
            echo "deps: error: apt-get could not install:$missing" >&2
            exit 1
        }
    fi
    exit 0
fi
echo "deps: error: missing Debian packages:$missing" >&2
echo "deps: install them with: sudo apt-get install$missing" >&2
exit 1
