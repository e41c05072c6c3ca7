"""UnitSpec: validation at construction, TOML/JSON round trips, preset families."""

import json

import pytest

from mxsim import presets, spec
from mxsim.errors import UnitError
from mxsim.spec import SpecError, UnitSpec


@pytest.mark.parametrize("name", presets.names())
def test_spec_every_preset_round_trips_toml_and_json(name, tmp_path):
    p = presets.get(name)
    a, b = p.pairs[0]
    s_fmt, block = p.scales[0]
    for c_format in p.c_formats:
        s = p.spec(a, b, scale_format=s_fmt, block=block, c_format=c_format)
        assert s.provenance and s.instruction
        for suffix, text in ((".toml", s.dumps("toml")), (".json", s.dumps("json"))):
            path = tmp_path / f"{name}{suffix}"
            path.write_text(text)
            assert spec.load(path) == s


def test_spec_enums_from_strings_and_replace():
    s = UnitSpec(name="x", align="rne", c_mode="after", acc_rounding="rz", overflow="ieee")
    assert s.align is spec.Align.RNE and s.c_mode is spec.CMode.AFTER
    t = s.replace(frac_bits=20)
    assert t.frac_bits == 20 and s.frac_bits == 13
    assert UnitSpec(name="x", schedule=[[1, 0], [3, 2]], k=4).steps() == ((1, 0), (3, 2))


@pytest.mark.parametrize("kwargs,message", [
    (dict(frac_bits=41), "frac_bits must be between 0 and 40 (or null for exact), not 41"),
    (dict(frac_bits=-1), "frac_bits must be between 0 and 40 (or null for exact), not -1"),
    (dict(k=4, schedule=[[0, 1], [1, 2]]),
     "schedule must cover k indices 0..3 exactly once (missing [3]; repeated [1])"),
    (dict(k=4, schedule=[[0, 1, 2, 3, 4]]),
     "schedule must cover k indices 0..3 exactly once (outside 0..3: [4])"),
    (dict(k=4, schedule=[[0, 1, 2, 3], []]),
     "schedule must cover k indices 0..3 exactly once (an empty step)"),
    (dict(a_format="fp16"), "a_format must be one of e4m3, e5m2, e3m2, e2m3, e2m1, int8, not "
                            "'fp16'"),
    (dict(b_format="e9m9"), "b_format must be one of e4m3, e5m2, e3m2, e2m3, e2m1, int8, not "
                            "'e9m9'"),
    (dict(acc_format="e4m3"), "acc_format must be fp32, fp16, bf16 or e8m1..e8m22, not 'e4m3'"),
    (dict(d_format="e8m13"), "d_format must be one of fp32, fp16, bf16, not 'e8m13'"),
    (dict(scale_format="e8m0"), "scale_format and block go together (both set or both null)"),
    (dict(scale_format="e8m0", block=24), "block must be 16 or 32, not 24"),
    (dict(scale_format="e8m0", block=32, k=48), "k (48) must be a multiple of the block (32)"),
    (dict(group=16), "group (GST-FDPA) needs block scales"),
    (dict(scale_format="e8m0", block=32, group=12), "group (12) must divide the block (32)"),
    (dict(scale_format="e8m0", block=32, group=16, k=32, schedule=[[0, 2] + list(range(3, 17)),
                                                                    [1] + list(range(17, 32))]),
     "with group 16, every step must be a contiguous run of whole groups"),
    (dict(a_format="e5m2", scale_format="e8m0", block=32, group=16),
     "a group sum of 16 e5m2 x e4m3 products needs 55 bits of fixed point, more than 54; "
     "GST-FDPA groups take narrow formats (FP4, FP6, E4M3)"),
    (dict(upcast="e5m2"), "upcast must be a float format holding every e4m3 and e4m3 value "
                          "exactly, not 'e5m2'"),
    (dict(upcast="fp16", scale_format="e8m0", block=32, group=16),
     "upcast applies to the products of fused steps, not to GST groups"),
    (dict(fold_scales=True, upcast="bf16"), "fold_scales multiplies E8M0 block scales into "
                                            "the operands in the upcast format: it needs "
                                            "upcast and scale_format e8m0"),
    (dict(fold_scales=1), "fold_scales must be true or false, not 1"),
    (dict(upcast_specials="nan"), "upcast_specials must be one of ieee, finite, not 'nan'"),
    (dict(upcast_specials="finite"), "upcast_specials describes the operand upcast: it needs "
                                     "upcast"),
    (dict(upcast_specials="finite", upcast="fp16", a_format="e5m2"),
     "upcast_specials 'finite' reads Inf/NaN codes as numbers up to 2**(emax+2); fp16 cannot "
     "hold them (use bf16 or fp32)"),
    (dict(scale_format="fp32"), "fp32 scales need the exact arithmetic (k and frac_bits null) "
                                "or an epilogue"),
    (dict(epilogue="beta"), "epilogue must be null or one of alpha, col-row, block-fma, not "
                            "'beta'"),
    (dict(epilogue="alpha"), "an epilogue applies fp32 scales to the FP32 result of a non-exact "
                             "unit: per tensor or row-wise (block null) for alpha and col-row, "
                             "in 128-blocks for block-fma"),
    (dict(epilogue="block-fma", scale_format="fp32", block=128, promote_every=2),
     "block-fma scales each 128-K partial sum: it needs promote_every * k == 128"),
    (dict(promote_every=0), "promote_every must be a positive integer or null, not 0"),
    (dict(promote_every=2, d_format="fp16", acc_format="fp16"),
     "promotion needs an instruction k and d_format fp32"),
    (dict(nan_code=0x7F800000), "nan_code must be a NaN code of fp32, not 2139095040"),
    (dict(align="nearest"), "align must be one of rz, rd, rne, rz-jam, not 'nearest'"),
])
def test_spec_bad_specs_are_rejected_when_built(kwargs, message):
    with pytest.raises(SpecError, match="^" + __import__("re").escape(
            f"Unit spec 'bad': {message}") + "$"):
        UnitSpec(name="bad", **kwargs)


def test_spec_load_errors(tmp_path):
    with pytest.raises(SpecError, match=r"no such spec file$"):
        spec.load(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("frac_bits = [")
    with pytest.raises(SpecError, match=r"bad.toml: not valid TOML"):
        spec.load(bad)
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"name": "u", "fraction_bits": 13}))
    with pytest.raises(SpecError, match=r"unknown.json: unknown key\(s\) fraction_bits; a unit "
                                        r"spec has a_format, "):
        spec.load(unknown)


def test_spec_preset_families_reject_what_they_lack():
    with pytest.raises(UnitError, match=r"^Unit blackwell-mxf4 does not take e4m3 x e4m3; it "
                                        r"takes e2m1xe2m1$"):
        presets.get("blackwell-mxf4").spec("e4m3", "e4m3", scale_format="e8m0", block=32)
    with pytest.raises(UnitError, match=r"^Unit hopper-cublas-fast does not take e5m2 x e5m2"):
        presets.get("hopper-cublas-fast").spec("e5m2", "e5m2")
    with pytest.raises(UnitError, match=r"^Unit hopper-cublas-fast takes C and D as fp32, not "
                                        r"fp16$"):
        presets.get("hopper-cublas-fast").spec("e4m3", "e4m3", c_format="fp16")
    with pytest.raises(UnitError, match=r"^Unknown unit 'h100'; choose one of exact, "):
        presets.get("h100")


def test_spec_hopper_parameters_are_the_published_ones():
    s32 = presets.get("hopper-wgmma").spec("e4m3", "e5m2")
    assert (s32.k, s32.frac_bits, s32.acc_format, s32.acc_rounding.value, s32.e_zero) == (
        32, 13, "e8m13", "rz", -133)
    s16 = presets.get("hopper-wgmma").spec("e4m3", "e5m2", c_format="fp16")
    assert (s16.acc_format, s16.acc_rounding.value, s16.e_zero, s16.d_nan) == (
        "fp16", "rne", -21, 0x7FFF)
    g = presets.get("blackwell-mxf4nvf4").spec("e2m1", "e2m1", scale_format="ue4m3", block=16)
    assert (g.k, g.group, g.frac_bits, g.e_zero) == (64, 16, 35, -139)
    assert g.instruction.startswith("mma.sync.m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X")
