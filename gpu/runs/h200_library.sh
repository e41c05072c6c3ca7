#!/usr/bin/env bash
# The library-GEMM run of issue 33, as one call on the GPU machine from a plain checkout:
#
#   SALT=<new salt> DEADLINE=480 bash gpu/runs/h200_library.sh OUT
#
# OUT receives library/ (records.jsonl and d/*.npy: see gpu/runs/library.py) and log (the
# versions, then every call). Then, on a CPU: python -m gpu.runs.library fit OUT/library
set -o pipefail
out=${1:?usage: gpu/runs/h200_library.sh OUT}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
{
    python3 -c "import json; from gpu.runs.validate import versions; print(json.dumps(versions()))"
    python3 -m gpu.runs.library run --salt "${SALT:?set SALT}" --deadline "${DEADLINE:-480}" \
        --out "$out/library"
} 2>&1 | tee "$out/log"
