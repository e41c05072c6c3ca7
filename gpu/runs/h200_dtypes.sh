#!/usr/bin/env bash
# The Hopper fp16/bf16/tf32 run, as run on the GPU machine from a plain checkout:
#
#   MXSIM_GIT_COMMIT=<commit> SALT=<new salt> DEADLINE=420 bash gpu/runs/h200_dtypes.sh OUT
#   ... FAMILIES=e-zero NAME=hopper16-ezero bash gpu/runs/h200_dtypes.sh OUT   # the e_zero ladders
#
# OUT receives hopper16/ (or NAME/: records.jsonl.gz, samples.npz, mismatches.npz if any set disagreed)
# and log: the versions, the SASS tensor-core instructions ptxas chose for the mma.sync
# kernels (nvcc -cubin -arch=sm_90, cuobjdump), and the console output of
# `gpu.runs.collect --what hopper16` (the fragment-layout check first, then every set).
set -o pipefail
out=${1:?usage: gpu/runs/h200_dtypes.sh OUT}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
{
    python3 -c "import json; from gpu.runs.validate import versions; print(json.dumps(versions()))"
    python3 -c "from gpu.hopper import mma_sync; print(mma_sync.float_source())" > /tmp/mma16.cu
    if nvcc -cubin -arch=sm_90 -o /tmp/mma16.cubin /tmp/mma16.cu; then
        echo "SASS tensor-core instructions per kernel (nvcc -cubin -arch=sm_90):"
        cuobjdump --dump-sass /tmp/mma16.cubin | grep -oE "Function : [A-Za-z0-9_]+|HMMA[.A-Z0-9]*" \
            | uniq -c
    fi
    python3 -m gpu.runs.collect --what hopper16 --salt "${SALT:?set SALT}" \
        --deadline "${DEADLINE:-420}" ${FAMILIES:+--families "$FAMILIES"} \
        --out "$out/${NAME:-hopper16}"
} 2>&1 | tee "$out/log"
