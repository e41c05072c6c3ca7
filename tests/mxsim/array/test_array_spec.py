"""ArraySpec: validation (one-line errors), derived sizes, dict / TOML / JSON round trips."""

import json

import pytest

from mxsim import units
from mxsim.array import (
    Accumulators,
    ArrayError,
    ArraySpec,
    Buffer,
    Dataflow,
    Scales,
    from_dict,
    load,
)
from mxsim.errors import MxsimError
from mxsim.microarch import MicroArch


def _unit(name="blackwell-mxf8f6f4", a="e4m3", b="e4m3"):
    return units.get(name).spec_for_formats(a, b)


def _full():
    return ArraySpec(name="t", unit=_unit(), microarch=MicroArch(lanes=8, stages=2), rows=2,
                     cols=3, dataflow="ws", a_buffer=Buffer(bytes=1024, bandwidth=64),
                     b_buffer={"bytes": 2048, "bandwidth": 32}, scales="separate",
                     scale_buffer=Buffer(bytes=64, bandwidth=2),
                     accumulators=Accumulators(kind="tmem", read_ports=2, write_ports=1,
                                               latency=3), interleave=4)


def test_array_spec_defaults_and_sizes():
    arr = ArraySpec(unit=_unit())
    assert (arr.rows, arr.cols, arr.dataflow, arr.scales) == (4, 4, Dataflow.OS, Scales.INLINE)
    assert arr.microarch == MicroArch(lanes=arr.unit.k)
    assert arr.passes == 1 and arr.latency == 3
    assert arr.scales_per_block == 1
    assert arr.element_bytes("a") == 32 and arr.block_bytes("a") == 33
    fp4 = ArraySpec(unit=_unit("blackwell-mxf4nvf4", "e2m1", "e2m1"), scales="separate",
                    scale_buffer=Buffer(bytes=16, bandwidth=1))
    assert fp4.element_bytes("b") == fp4.unit.k // 2
    assert fp4.block_bytes("b") == fp4.element_bytes("b")       # scales travel apart
    assert fp4.scales_per_block == fp4.unit.k // fp4.unit.block


@pytest.mark.parametrize("fmt", ["toml", "json"])
def test_array_spec_round_trip(tmp_path, fmt):
    arr = _full()
    assert from_dict(arr.to_dict()) == arr
    path = tmp_path / f"a.{fmt}"
    path.write_text(arr.dumps(fmt))
    assert load(path) == arr
    assert load(path).to_dict() == arr.to_dict()


def test_array_spec_unit_by_name(tmp_path):
    path = tmp_path / "a.toml"
    path.write_text('unit = "blackwell-mxf4"\na_format = "e2m1"\nb_format = "e2m1"\n'
                    'rows = 2\ncols = 2\n')
    arr = load(path)
    assert arr.unit == _unit("blackwell-mxf4", "e2m1", "e2m1")
    assert arr.to_dict()["unit"]["a_format"] == "e2m1"


BAD = [
    ({"rows": 0}, "rows must be at least 1"),
    ({"cols": 2.0}, "cols must be an integer"),
    ({"dataflow": "rs"}, "dataflow must be one of os, ws, is"),
    ({"interleave": 0}, "interleave must be at least 1"),
    ({"interleave": 5000}, "interleave must be at most"),
    ({"rows": 1000, "cols": 1000}, "at most 65536 units"),
    ({"scales": "separate"}, "needs a scale_buffer"),
    ({"scale_buffer": Buffer(bytes=1, bandwidth=1)}, "used only with scales"),
    ({"a_buffer": {"bytes": 0, "bandwidth": 1}}, "a_buffer: buffer bytes must be at least 1"),
    ({"b_buffer": {"bytes": 1, "bandwith": 1}}, "b_buffer: unknown key(s) bandwith"),
    ({"accumulators": {"kind": "sram"}}, "kind must be one of registers, tmem"),
    ({"accumulators": {"kind": "tmem", "latency": -1}}, "latency must be at least 0"),
    ({"microarch": MicroArch(lanes=5)}, "lanes (5) must divide the unit's k (32)"),
    ({"unit": "nope"}, "unit must be a UnitSpec"),
    ({"name": 3}, "name must be a string"),
]


@pytest.mark.parametrize("change,msg", BAD, ids=[m for _, m in BAD])
def test_array_spec_bad(change, msg):
    with pytest.raises(ArrayError) as err:
        ArraySpec(**{"unit": _unit(), **change})
    assert msg in str(err.value) and "\n" not in str(err.value)


def test_array_spec_bad_units():
    with pytest.raises(ArrayError, match="an exact unit"):
        ArraySpec(unit=units.get("exact").spec_for_formats("e4m3", "e4m3"))
    with pytest.raises(ArrayError, match="needs a scaled unit"):
        ArraySpec(unit=_unit("hopper-wgmma"), scales="separate",
                  scale_buffer=Buffer(bytes=1, bandwidth=1))


@pytest.mark.parametrize("data,msg", [
    ([], "must be a table of fields"),
    ({"rows": 2}, "needs a unit"),
    ({"unit": "hopper-wgmma", "rowz": 2}, "unknown key(s) rowz"),
    ({"unit": {"k": 32, "a_format": "e9m9"}}, "[unit]"),
    ({"unit": "hopper-wgmma", "microarch": {"lanes": 3}}, "lanes (3) must divide"),
    ({"unit": "hopper-wgmma", "microarch": {"lanes": 0}}, "microarch: lanes must be at least 1"),
    ({"unit": 3}, "unit must be a unit name or a table"),
    ({"unit": "hopper-wgmma", "accumulators": 3}, "accumulators must be a table"),
])
def test_array_from_dict_bad(data, msg):
    with pytest.raises(MxsimError) as err:
        from_dict(data, source="x.toml")
    assert msg in str(err.value) and "\n" not in str(err.value)


def test_array_load_bad(tmp_path):
    with pytest.raises(ArrayError, match="no such array file"):
        load(tmp_path / "missing.toml")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ArrayError, match="not valid JSON"):
        load(bad)
    good = tmp_path / "g.json"
    good.write_text(json.dumps(_full().to_dict()))
    assert load(good) == _full()


def test_array_from_dict_unknown_unit_name():
    with pytest.raises(ArrayError, match=r"^x.toml: unit: ") as err:
        from_dict({"unit": "no-such-unit"}, source="x.toml")
    assert "\n" not in str(err.value)


def test_array_docs_examples_run(tmp_path, capsys):
    """docs/array.md's TOML file loads (and round-trips) and its Python example runs."""
    import re
    from pathlib import Path
    text = (Path(__file__).parents[3] / "docs" / "array.md").read_text()
    toml = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    path = tmp_path / "arr.toml"
    path.write_text(toml)
    arr = load(path)
    assert (arr.rows, arr.dataflow, arr.accumulators.kind) == (4, Dataflow.OS, "tmem")
    assert load_text(arr.dumps()) == arr
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(code, "docs/array.md", "exec"), {})
    assert "utilisation" in capsys.readouterr().out


def load_text(text):
    import tomllib
    return from_dict(tomllib.loads(text))
