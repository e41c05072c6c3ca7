"""resolve_design: the one route from a unit and options to the (spec, MicroArch) the RTL builds."""

import pytest

from mxsim import presets, units
from mxsim.design import resolve_design
from mxsim.errors import UnitError
from mxsim.microarch import MicroArch, MicroArchError
from mxsim.spec import SpecError


def test_preset_pair_lanes_default_to_k():
    spec, ua = resolve_design("blackwell-mxf8f6f4", "e5m2", "e4m3", stages=2)
    assert spec == presets.get("blackwell-mxf8f6f4").spec("e5m2", "e4m3", scale_format="e8m0",
                                                           block=32)
    assert ua == MicroArch(lanes=32, stages=2)


def test_b_defaults_to_a_and_a_to_e4m3():
    assert resolve_design("hopper-wgmma")[0].b_format == "e4m3"
    assert resolve_design("hopper-wgmma", "e5m2")[0].b_format == "e5m2"


def test_fixed_spec_keeps_its_formats_and_checks_a_pair(tmp_path):
    spec = presets.get("hopper-wgmma").spec("e5m2", "e5m2")
    got, ua = resolve_design(spec, lanes=8)
    assert got == spec and ua.lanes == 8
    path = tmp_path / "u.toml"
    path.write_text(spec.dumps("toml"))
    assert resolve_design(str(path))[0] == units.get(str(path)).spec_for_formats()
    with pytest.raises(UnitError, match="specified for e5m2 x e5m2, not e4m3 x e4m3"):
        resolve_design(str(path), "e4m3")


def test_overrides_apply_before_the_rtl_check():
    spec, _ = resolve_design("blackwell-mxf8f6f4", overrides={"acc_rounding": "rne"})
    assert spec.acc_rounding.value == "rne"
    with pytest.raises(MicroArchError, match="acc_rounding rd is not supported"):
        resolve_design("blackwell-mxf8f6f4", overrides={"acc_rounding": "rd"})
    with pytest.raises(SpecError):
        resolve_design("blackwell-mxf8f6f4", overrides={"frac_bits": -1})


def test_refuses_what_the_rtl_cannot_build():
    with pytest.raises(MicroArchError, match=r"lanes \(5\) must divide the instruction k \(32\)"):
        resolve_design("blackwell-mxf8f6f4", lanes=5)
    with pytest.raises(MicroArchError, match="cannot be built as RTL"):
        resolve_design("exact")
