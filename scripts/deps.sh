#!/bin/sh
# deps.sh: make sure the Debian packages that sweep and fp4serve build and
# test with are present. As root with apt-get, missing ones are installed;
# otherwise the exact install command is printed and the script fails.
# Usage: scripts/deps.sh [--check]   (--check: report only, never install)
set -u

# pkg-config module or command -> Debian package
need_pc="yaml-0.1:libyaml-dev libcurl:libcurl4-openssl-dev libpcre2-8:libpcre2-dev
jansson:libjansson-dev libmicrohttpd:libmicrohttpd-dev"
need_cmd="pkg-config:pkg-config gnuplot:gnuplot-nox curl:curl cc:gcc make:make python3:python3
ssh:openssh-client ssh-keygen:openssh-client sbatch:slurm-client munge:munge"

missing=""
for pair in $need_cmd; do
    cmd=${pair%%:*} pkg=${pair#*:}
    command -v "$cmd" >/dev/null 2>&1 || missing="$missing $pkg"
done
# daemons the executor tests start of their own (sshd; munged, slurmctld,
# slurmd) are in /usr/sbin, off a user's PATH
for pair in sshd:openssh-server munged:munge slurmctld:slurmctld slurmd:slurmd; do
    [ -x "/usr/sbin/${pair%%:*}" ] || missing="$missing ${pair#*:}"
done
if command -v pkg-config >/dev/null 2>&1; then
    for pair in $need_pc; do
        mod=${pair%%:*} pkg=${pair#*:}
        pkg-config --exists "$mod" 2>/dev/null || missing="$missing $pkg"
    done
else
    for pair in $need_pc; do missing="$missing ${pair#*:}"; done
fi
[ -z "$missing" ] && exit 0

if [ "${1:-}" != "--check" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
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
