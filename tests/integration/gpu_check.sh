# gpu_check: tests/gpu/check.sh (`make check-gpu`) without a usable GPU
# prints one "check-gpu: skipped: WHY" line and exits 0, whatever
# nvidia-smi says (it fails, or lists no GPU); a bad argument is exit 2
# with the flag named, before anything runs.
. tests/lib.sh

mkdir -p "$T_TMP/fails" "$T_TMP/none"
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."\nexit 9\n' \
    >"$T_TMP/fails/nvidia-smi"
printf '#!/bin/sh\nexit 0\n' >"$T_TMP/none/nvidia-smi"
chmod +x "$T_TMP/fails/nvidia-smi" "$T_TMP/none/nvidia-smi"

for kind in fails none; do
    out=$(PATH="$T_TMP/$kind:$PATH" OUT="$T_TMP/out-$kind" bash tests/gpu/check.sh 2>&1)
    check_eq "nvidia-smi $kind: exit 0" "$?" "0"
    check_eq "nvidia-smi $kind: one line" "$(echo "$out" | wc -l)" "1"
    check "nvidia-smi $kind: says why ($out)" \
        sh -c "echo '$out' | grep -q '^check-gpu: skipped: no GPU (nvidia-smi'"
    check "nvidia-smi $kind: nothing written to \$OUT" [ ! -e "$T_TMP/out-$kind" ]
done

for args in "--bogus" "--prebuilt" "--prebuilt $T_TMP/nothing-here" "--prebuilt=" \
    "--prebuilt $BUILD --bundle $T_TMP/b"; do
    # shellcheck disable=SC2086 # the words of args are the arguments
    PATH="$T_TMP/none:$PATH" bash tests/gpu/check.sh $args >"$T_TMP/o" 2>"$T_TMP/e"
    check_eq "check.sh $args: exit 2" "$?" "2"
    check "check.sh $args: the error names the flag ($(head -n 1 "$T_TMP/e"))" \
        grep -q -- "^check.sh: .*${args%%[ =]*}" "$T_TMP/e"
done
finish
