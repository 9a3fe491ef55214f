#!/bin/sh
# setup_python_clients.sh [--with-vllm]: make build/bench-venv, the Python
# environment in which tests/bench/bench_loadgen.sh runs SGLang's and vLLM's
# benchmark clients against the same fakeserver as `sweep bench`. Needs PyPI.
#   SGLang: the sglang wheel without its dependencies (torch, the engine),
#     plus what its client imports: about 600 MB, a minute or two.
#   vLLM (--with-vllm): vllm and its dependencies, torch included: about
#     10 GB and several minutes. vllm.benchmarks imports torch through its
#     tokenizer helpers, so there is no light way.
# Versions are pinned to the ones the numbers in the report came from.
set -eu
BUILD=${BUILD:-build}
venv="$BUILD/bench-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip="$venv/bin/pip"
"$pip" install -q --no-deps sglang==0.5.23
"$pip" install -q aiohttp msgspec numpy orjson requests tqdm transformers tokenizers psutil \
    pybase64 datasets pyzmq pillow
if [ "${1:-}" = --with-vllm ]; then
    "$pip" install -q torch
    "$pip" install -q vllm==0.33.0
fi
"$venv/bin/python" tests/bench/make_tokenizer.py "$BUILD/bench-tokenizer"
echo "setup_python_clients: ready in $venv"
