# check_layers: `make check`'s layer and comment-path scans
# (scripts/check-layers.sh, scripts/check-paths.sh) pass on the tree and
# fail on what is planted in a copy of it: an include that runs up each
# program's layer order, a backend header included from outside the backend
# table, a peer include (text <-> model), common/ including a program, and
# a comment naming a file that does not exist. The copy is outside git, so
# the scripts read every file found.
. tests/lib.sh

cd "$TOPDIR" || exit 1
check "layers: the tree keeps the order" sh scripts/check-layers.sh
check "paths: every path in a comment exists" sh scripts/check-paths.sh

# A copy of the tracked (and untracked, not ignored) files.
mk_copy() {
    rm -rf "$T_TMP/tree"
    mkdir -p "$T_TMP/tree"
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files --cached --others --exclude-standard -- runner engine common tests docs \
            scripts plots experiments Makefile
    else
        find runner engine common tests docs scripts plots experiments Makefile -type f
    fi | while read -r f; do [ -f "$f" ] && echo "$f"; done |
        tar -cf - -T - | tar -xf - -C "$T_TMP/tree"
}
# plant_layers WHAT FILE TEXT WANT: TEXT appended to FILE in a fresh copy;
# check-layers must fail and name FILE and WANT.
plant_layers() {
    mk_copy
    printf '%s\n' "$3" >>"$T_TMP/tree/$2"
    out=$(cd "$T_TMP/tree" && sh scripts/check-layers.sh)
    rc=$?
    check_eq "layers: $1 fails" "$rc" "1"
    case "$out" in
    *"$2:"*"$4"*) ok "layers: $1 named ($2)" ;;
    *) fail "layers: $1 not named: $out" ;;
    esac
}
mk_copy
check "layers: the copy passes as it is" sh -c "cd '$T_TMP/tree' && sh scripts/check-layers.sh"
plant_layers "runner store -> analysis" runner/store/results.c '#include "analysis/fit.h"' \
    "store may not include analysis"
plant_layers "runner config -> exec" runner/config/plan.h '#include "exec/proc.h"' \
    "config may not include exec"
plant_layers "engine format -> model" engine/format/gguf.c '#include "model/model.h"' \
    "format may not include model"
plant_layers "engine text -> serve" engine/text/stop.c '#include "serve/server.h"' \
    "text may not include serve"
plant_layers "engine model -> cuda" engine/model/model.c '#include "cuda/cuda.h"' \
    "through model/backend.h"
plant_layers "engine text <-> model peers" engine/text/utf8.c '#include "model/sample.h"' \
    "peers"
plant_layers "common -> runner" common/buf.c '#include "store/results.h"' \
    "common/ includes nothing"
# a header without a folder resolves beside the file first: cpu/ops.h from cpu is fine
mk_copy
printf '#include "ops.h"\n' >>"$T_TMP/tree/engine/cpu/matmul.c"
check "layers: a same-folder include passes" sh -c "cd '$T_TMP/tree' && sh scripts/check-layers.sh"

# plant_path WHAT FILE TEXT: a comment appended to FILE; check-paths must fail naming it.
plant_path() {
    mk_copy
    printf '%s\n' "$3" >>"$T_TMP/tree/$2"
    out=$(cd "$T_TMP/tree" && sh scripts/check-paths.sh)
    rc=$?
    check_eq "paths: $1 fails" "$rc" "1"
    case "$out" in
    *"$2:"*"names no file"*) ok "paths: $1 named" ;;
    *) fail "paths: $1 not named: $out" ;;
    esac
}
plant_path "a moved C file" runner/exec/proc.c '/* see runner/exec/nothere.c */'
plant_path "an area-relative header" engine/cpu/ops.c '// layout in format/nothere.h'
plant_path "a module without extension" tests/unit/engine_quant.c '/* Unit tests for engine/quant */'
plant_path "a test script in a shell comment" tests/integration/fp4_help.sh '# see tests/integration/nothere.sh'
# what must not count: URLs, system headers, placeholders, globs that match, modules that exist
mk_copy
cat >>"$T_TMP/tree/engine/cpu/ops.c" <<'EOF'
/* https://github.com/ggml-org/llama.cpp/blob/master/ggml/src/ggml-common.h,
 * <sys/mman.h>, plots/NAME.gp, tests/integration/run_*.sh,
 * engine/model/sample, cpu/matmul.h, text/event-stream. */
EOF
check "paths: URLs, placeholders, globs and modules pass" \
    sh -c "cd '$T_TMP/tree' && sh scripts/check-paths.sh"
finish
