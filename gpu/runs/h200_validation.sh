#!/usr/bin/env bash
# The 2026-12-01 H200 validation, as run on the GPU machine from a plain checkout:
#
#   MXSIM_GIT_COMMIT=<commit> DEADLINE=420 bash gpu/runs/h200_validation.sh OUT
#
# OUT receives heldout/, bias/, validate/ and log (what tests/data/h200/2026-12-01/ holds).
# numba is taken from .whl/numba-site.tar.xz (numba and llvmlite unpacked) when the machine
# has none, so the fast engine runs compiled, not in numpy.
set -o pipefail
out=${1:?usage: gpu/runs/h200_validation.sh OUT}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
if ! python3 -c "import numba" 2>/dev/null && [ -f .whl/numba-site.tar.xz ]; then
    mkdir -p /tmp/site && tar xJf .whl/numba-site.tar.xz -C /tmp/site
    export PYTHONPATH=.:/tmp/site
fi
{
    python3 -c "import json; from gpu.runs.validate import versions; print(json.dumps(versions()))"
    python3 -m gpu.runs.collect --what heldout --salt heldout-2026-12-01 --out "$out/heldout"
    python3 -m gpu.runs.collect --what bias --salt bias-2026-12-01 --out "$out/bias"
    python3 -m gpu.runs.collect --what validate --salt validation-2026-12-01 \
        --deadline "${DEADLINE:-420}" --out "$out/validate"
} 2>&1 | tee "$out/log"
