# run_cgroup_child.sh: a server that makes a cgroup of its own below the
# one sweep gave it, and moves into it, leaves nothing behind after a
# normal run: sweep removes its cgroups with what was made below them
# (issue 23, docs/reliability.md W3-N8). Skipped, with the reason, when no
# writable cgroup2 hierarchy holds this shell's cgroup.
. tests/lib.sh
cd "$T_TMP" || exit 1

if ! cgroup_dir_writable; then
    echo "skip: no writable cgroup2 hierarchy at '$CGDIR' - child cgroups not tested"
    finish
    exit
fi
cgdir=$CGDIR

# the server's wrapper: a cgroup "inner" below its own, itself moved into it
cat >mkcg.sh <<'SH'
#!/bin/sh
mnt=$(awk '/ - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
cg="$mnt$(sed -n 's/^0:://p' /proc/self/cgroup)"
mkdir "${cg%/}/inner" && echo $$ >"${cg%/}/inner/cgroup.procs" || echo "mkcg: cannot" >&2
exec "$@"
SH
chmod +x mkcg.sh
make_experiment fakeserver c.yaml NAME=cgchild PIDFILE="$T_TMP/srv.pid" OUTPUT_LEN=4 \
    GRID='["1:2", "2:2"]' WRAP="\"$T_TMP/mkcg.sh\", "
"$SWEEP" run c.yaml --out run >o.txt 2>e.txt &
sp=$!
track_pid "$sp"
wait_file srv.pid 30 || fail "the server did not start"
check "the server runs in a cgroup it made below sweep's" \
    grep -q "^0::${own%/}/sweep-$sp-[0-9]*-ns[0-9]*-server-1/inner\$" "/proc/$(cat srv.pid)/cgroup"
wait "$sp"
check_eq "a normal run: exit 0" "$?" 0
check "a normal run: no cgroup of it left" sh -c "! ls -d '$cgdir'/sweep-$sp-* 2>/dev/null"
check "a normal run: no warning" sh -c "! grep -q 'mkcg: cannot\|no longer running' e.txt"
finish
