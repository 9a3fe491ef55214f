#!/bin/sh
# deps.sh: make sure the Debian packages that sweep and fp4serve build, run
# and test with are present. What is needed is listed once, in
# scripts/deps.list (tests/lib.sh's `need` reads the same file). As root
# with apt-get, missing packages are installed: apt's package lists are
# fetched first when there are none (a new machine or container), and again
# when an install cannot find a package. Otherwise the exact install command
# is printed; a missing build package is then an error, a missing test
# package a note (the tests that need it skip, naming it).
# Usage: scripts/deps.sh [--check]   (--check: report only, never install)
set -u
list=$(dirname "$0")/deps.list

# present KIND NAME: is it there?
present() {
    case "$1" in
    cmd) command -v "$2" >/dev/null 2>&1 ;;
    sbin) [ -x "/usr/sbin/$2" ] ;;
    pc) command -v pkg-config >/dev/null 2>&1 && pkg-config --exists "$2" 2>/dev/null ;;
    pkg) [ "$(dpkg-query -W -f='${Status}' "$2" 2>/dev/null)" = "install ok installed" ] ;;
    *) echo "deps: $list: unknown kind '$1'" >&2; return 1 ;;
    esac
}

build_missing="" test_missing=""
while read -r kind name pkg when _; do
    case "$kind" in '' | '#'*) continue ;; esac
    present "$kind" "$name" && continue
    case "$when" in
    build) case " $build_missing " in *" $pkg "*) ;; *) build_missing="$build_missing $pkg" ;; esac ;;
    *) case " $test_missing " in *" $pkg "*) ;; *) test_missing="$test_missing $pkg" ;; esac ;;
    esac
done <"$list"
[ -z "$build_missing$test_missing" ] && exit 0

can_install=""
if [ "${1:-}" != "--check" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    can_install=1
fi
if [ -z "$can_install" ]; then
    [ -n "$test_missing" ] &&
        echo "deps: note: without$test_missing the tests that need them are skipped (sudo apt-get install$test_missing)" >&2
    [ -z "$build_missing" ] && exit 0
    echo "deps: error: missing Debian packages:$build_missing" >&2
    echo "deps: install them with: sudo apt-get install$build_missing" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
updated=""
update() {
    [ -n "$updated" ] && return 1
    updated=1
    echo "deps: apt-get update" >&2
    apt-get update -q >&2
}
# A new root has no package lists: every install would fail "Unable to locate".
ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1 || update
# install PKG...: all at once; after a failure, fresh lists and one at a time,
# so that one package apt cannot find does not keep the others out.
install() {
    apt-get install -y -q --no-install-recommends "$@" >&2 && return 0
    update
    apt-get install -y -q --no-install-recommends "$@" >&2 && return 0
    bad=""
    for p in "$@"; do
        apt-get install -y -q --no-install-recommends "$p" >&2 || bad="$bad $p"
    done
    [ -z "$bad" ] && return 0
    echo "deps: apt-get could not install:$bad" >&2
    return 1
}
if [ -n "$build_missing" ]; then
    echo "deps: installing missing Debian packages:$build_missing" >&2
    # shellcheck disable=SC2086
    install $build_missing || { echo "deps: error: the build needs them" >&2; exit 1; }
fi
if [ -n "$test_missing" ]; then
    echo "deps: installing Debian packages the tests use:$test_missing" >&2
    # shellcheck disable=SC2086
    install $test_missing || echo "deps: note: the tests that need those are skipped" >&2
fi
exit 0
