#!/usr/bin/env bash
# The library-GEMM run of issue 33, as one call on the GPU machine from a plain checkout:
#
#   SALT=<new salt> DEADLINE=480 bash gpu/runs/h200_library.sh OUT
#
# OUT receives library/records.jsonl, library/d-<group>.tar.gz (the outputs d/<group>-*.npy of
# gpu/runs/library.py, packed a group a file: the device tool brings back 8 files) and log (the
# versions, then every call). Then, on a CPU:
#   for t in OUT/library/d-*.tar.gz; do tar xzf $t -C OUT/library; done
#   python -m gpu.runs.library fit OUT/library
set -o pipefail
out=${1:?usage: gpu/runs/h200_library.sh OUT}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
{
    python3 -c "import json; from gpu.runs.validate import versions; print(json.dumps(versions()))"
    python3 -m gpu.runs.library run --salt "${SALT:?set SALT}" --deadline "${DEADLINE:-480}" \
        --out "$out/library"
} 2>&1 | tee "$out/log"
for g in table heldout torch invariance; do
    (cd "$out/library" && ls d/$g-*.npy >/dev/null 2>&1 && tar czf d-$g.tar.gz d/$g-*.npy)
done
rm -rf "$out/library/d"
ls -l "$out/library"
