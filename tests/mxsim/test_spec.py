"""UnitSpec: validation at construction, TOML/JSON round trips, preset families."""

import enum
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


def test_spec_every_policy_field_holds_an_enum():
    s = presets.get("triton-dot-scaled-hopper").spec("e5m2", "e4m3", scale_format="e8m0",
                                                      block=32)
    r = presets.get("hopper-cublas-rowwise").spec("e4m3", "e4m3", scale_format="fp32",
                                                  granularity="tensor")
    b = presets.get("hopper-cublas-blockwise").spec("e4m3", "e4m3", scale_format="fp32",
                                                    block=128)
    assert s.upcast_specials is spec.UpcastSpecials.FINITE and s.epilogue is None
    assert r.epilogue is spec.Epilogue.ALPHA and b.epilogue is spec.Epilogue.BLOCK_FMA
    assert UnitSpec().upcast_specials is spec.UpcastSpecials.IEEE
    # The members equal their spellings in spec files, and the files do not change.
    assert (s.upcast_specials, r.epilogue, b.epilogue) == ("finite", "alpha", "block-fma")
    assert 'upcast_specials = "finite"' in s.dumps() and 'epilogue = "alpha"' in r.dumps()
    assert json.loads(b.dumps("json"))["epilogue"] == "block-fma"
    # Given as members or as strings: the same spec.
    assert b.replace(epilogue=spec.Epilogue.BLOCK_FMA) == b.replace(epilogue="block-fma") == b
    for name, value in [item for x in (s, r, b) for item in vars(x).items()]:
        policy = name in ("align", "product", "c_mode", "zero_sign", "overflow",
                          "upcast_specials", "epilogue") or name.endswith("rounding")
        assert not policy or value is None or isinstance(value, enum.Enum), name


@pytest.mark.parametrize("kwargs,message", [
    (dict(frac_bits=41), "frac_bits must be between 0 and 40 (or null for exact), not 41"),
    (dict(frac_bits=-1), "frac_bits must be between 0 and 40 (or null for exact), not -1"),
    (dict(k=4, schedule=[[0, 1], [1, 2]]),
     "schedule must cover k indices 0..3 exactly once (missing [3]; repeated [1])"),
    (dict(k=4, schedule=[[0, 1, 2, 3, 4]]),
     "schedule must cover k indices 0..3 exactly once (outside 0..3: [4])"),
    (dict(k=4, schedule=[[0, 1, 2, 3], []]),
     "schedule must cover k indices 0..3 exactly once (an empty step)"),
    (dict(a_format="fp32"), "a_format must be one of e4m3, e5m2, e3m2, e2m3, e2m1, int8, fp16, "
                            "bf16, tf32, not 'fp32'"),
    (dict(b_format="e9m9"), "b_format must be one of e4m3, e5m2, e3m2, e2m3, e2m1, int8, fp16, "
                            "bf16, tf32, not 'e9m9'"),
    (dict(b_format="bf16", scale_format="e8m0", block=32),
     "scales go with MX element formats only; b_format is bf16, so scale_format must be null, "
     "not 'e8m0'"),
    (dict(a_format="tf32", b_format="tf32", upcast="bf16"),
     "upcast must be a float format holding every tf32 and tf32 value exactly, not 'bf16'"),
    (dict(acc_format="e4m3"), "acc_format must be fp32, fp16, bf16 or e8m1..e8m22, not 'e4m3'"),
    (dict(d_format="e8m13"), "d_format must be one of fp32, fp16, bf16, not 'e8m13'"),
    (dict(scale_format="e8m0"), "scale_format and block go together (both set or both null)"),
    (dict(scale_format="e8m0", block=24), "block must be a power of two from 1 to 65536, not 24"),
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
    # Every field bounded and typed (issue 14, findings 5, 9-11).
    (dict(frac_bits=True), "frac_bits must be an integer or null, not True"),
    (dict(frac_bits=13.0), "frac_bits must be an integer or null, not 13.0"),
    (dict(e_zero=2 ** 63 - 1), "e_zero must be between -1024 and 1024 (beyond, zeros align "
                               "as at the bound), not 9223372036854775807"),
    (dict(e_zero=-1025), "e_zero must be between -1024 and 1024 (beyond, zeros align as at "
                         "the bound), not -1025"),
    (dict(e_zero=-133.0), "e_zero must be an integer, not -133.0"),
    (dict(e_zero="-133"), "e_zero must be an integer, not '-133'"),
    (dict(e_zero=None), "e_zero must be an integer, not None"),
    (dict(k=10 ** 9), "k must be an integer from 1 to 65536 or null, not 1000000000"),
    (dict(k=1 << 22, frac_bits=40), "k must be an integer from 1 to 65536 or null, not 4194304"),
    (dict(k=0), "k must be an integer from 1 to 65536 or null, not 0"),
    (dict(k="32"), "k must be an integer or null, not '32'"),
    (dict(scale_format="ue4m3", block=16, group=16, k=64, frac_bits=37),
     "k = 64 and frac_bits = 37 give a step sum of up to 64 bits; the engines sum in int64 "
     "(at most 63 bits): lower k or frac_bits"),
    (dict(scale_format="e8m0", block=16.0), "block must be an integer or null, not 16.0"),
    (dict(scale_format="e8m0", block=32, group=True), "group must be an integer or null, not "
                                                      "True"),
    (dict(promote_every=True), "promote_every must be an integer or null, not True"),
    (dict(nan_code=2.5), "nan_code must be an integer or null, not 2.5"),
    (dict(k=2, schedule=[[0.5], [1]]), "schedule must be a list of lists of k indices, not "
                                       "[[0.5], [1]]"),
    (dict(k=2, schedule=[["0", "1"]]), "schedule must be a list of lists of k indices, not "
                                       "[['0', '1']]"),
    (dict(k=2, schedule="01"), "schedule must be a list of lists of k indices, not '01'"),
    (dict(upcast=5), "upcast must be a string or null, not 5"),
    (dict(acc_format=["fp32"]), "acc_format must be a string, not ['fp32']"),
    (dict(instruction=None), "instruction must be a string, not None"),
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


def test_spec_integer_fields_take_numpy_integers():
    import numpy as np
    s = UnitSpec(k=np.int64(32), frac_bits=np.int32(13), e_zero=np.int16(-133))
    assert (s.k, s.frac_bits, s.e_zero) == (32, 13, -133)
    assert all(type(v) is int for v in (s.k, s.frac_bits, s.e_zero))


def test_spec_bounds_hold_every_preset():
    """The bounds refuse nothing a preset uses: every preset's largest step sum fits int64."""
    import itertools
    for name in presets.names():
        p = presets.get(name)
        for a, b in itertools.product(spec.ELEMENT_FORMATS, repeat=2):
            for scale, block in p.scales if hasattr(p, "scales") else [(None, None)]:
                try:
                    s = p.spec(a, b, scale_format=scale, block=block)
                except UnitError:
                    continue
                assert -spec.E_ZERO_LIMIT <= s.e_zero <= spec.E_ZERO_LIMIT
                if s.frac_bits is not None and s.k is not None:
                    assert spec.step_sum_bits(s) <= spec.MAX_STEP_SUM_BITS


def test_spec_step_sum_bound_is_where_int64_ends():
    """At the largest accepted frac_bits the engines agree on the largest GST terms; one bit
    more is refused (the old engines returned 0x52b08000 against the reference's 0x54161000
    at frac_bits 40: an int64 sum wrapped)."""
    import numpy as np

    from mxsim.engine import fast, reference
    from mxsim.vectors import VectorSet
    kw = dict(scale_format="ue4m3", block=16, group=16, k=64, acc_format="fp32")
    s = UnitSpec(frac_bits=36, **kw)
    assert spec.step_sum_bits(s) == 63
    top = np.uint8(0x7E)                           # 448, UE4M3 scale 448 too
    vs = VectorSet(a=np.full((1, 64), top), b=np.full((64, 1), top),
                   a_scale=np.full((1, 4), top), b_scale=np.full((4, 1), top),
                   scale_format="ue4m3", block=16)
    want = reference.dot(s, vs)
    assert int(want[0, 0]) == 0x54161000
    np.testing.assert_array_equal(fast.dot(s, vs), want)
    with pytest.raises(SpecError, match=r"frac_bits = 37 give a step sum of up to 64 bits"):
        UnitSpec(frac_bits=37, **kw)


@pytest.mark.parametrize("name,text,message", [
    ("empty.toml", "", "a unit spec must set at least one field (it is empty); start from "
                       "`mxsim units --spec NAME`"),
    ("comment.toml", "# nothing\n", "a unit spec must set at least one field (it is empty); "
                                    "start from `mxsim units --spec NAME`"),
    ("empty.json", "{}", "a unit spec must set at least one field (it is empty); start from "
                         "`mxsim units --spec NAME`"),
    ("list.json", "[1, 2]", "a unit spec must be a table of fields, not list"),
    ("true.toml", "frac_bits = true\n", "Unit spec 'custom': frac_bits must be an integer or "
                                        "null, not True"),
    ("float.toml", "e_zero = -133.5\n", "Unit spec 'custom': e_zero must be an integer, not "
                                        "-133.5"),
    ("string.json", '{"e_zero": "low"}', "Unit spec 'custom': e_zero must be an integer, not "
                                         "'low'"),
    ("table.toml", "[k]\nx = 1\n", "Unit spec 'custom': k must be an integer or null, not "
                                    "{'x': 1}"),
    ("nullname.toml", 'name = "none"\nk = "none"\nfrac_bits = "none"\n', None),
])
def test_spec_files_bounded(tmp_path, name, text, message):
    """Spec files: empty, not a table, or with fields of the wrong type are refused in one
    line; "none" is null only for the fields that may be null."""
    path = tmp_path / name
    path.write_text(text)
    if message is None:
        s = spec.load(path)
        assert (s.name, s.k, s.frac_bits) == ("none", None, None)
        return
    prefix = __import__("re").escape(f"{path}: ")
    with pytest.raises(SpecError, match="^" + prefix + __import__("re").escape(message) + "$"):
        spec.load(path)


def test_spec_files_not_text_or_too_deep_or_too_big(tmp_path):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"k = 32\n\xff\xfe\x00")
    with pytest.raises(SpecError, match=r"binary.toml: a spec file must be UTF-8 TOML text "
                                        r"\(byte 7 is not UTF-8\)$"):
        spec.load(binary)
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"name": "caf\u00e9"}'.encode("latin-1"))
    with pytest.raises(SpecError, match=r"latin.json: a spec file must be UTF-8 JSON text"):
        spec.load(latin)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SpecError, match=r"deep.json: not valid JSON \(nested too deeply\)$"):
        spec.load(deep)
    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text("k = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(SpecError, match=r"deep.toml: not valid TOML"):
        spec.load(deep_toml)
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * spec.MAX_SPEC_FILE_BYTES + "\n")
    with pytest.raises(SpecError, match=r"big.toml: a spec file must be at most 1048576 bytes"):
        spec.load(big)


def test_spec_check_rtl_bounds_k_and_e_zero():
    """The RTL carries 12-bit exponents and k elements per payload: check_rtl refuses what
    does not fit, in one line, before anything is elaborated."""
    from dataclasses import replace

    from mxsim import microarch
    from mxsim.microarch import MicroArchError, check_rtl
    base = presets.get("hopper-wgmma").spec("e4m3", "e4m3")
    for e_zero in (-spec.E_ZERO_LIMIT, spec.E_ZERO_LIMIT):
        check_rtl(base.replace(e_zero=e_zero))           # the spec's whole range fits
    with pytest.raises(MicroArchError, match=r"^Unit 'hopper-wgmma' cannot be built as RTL: k "
                                             r"must be at most 256 for RTL, not 512$"):
        check_rtl(base.replace(k=512))
    # The guard itself, past the spec's bound (a spec built before the bound existed).
    wide = replace(base)
    object.__setattr__(wide, "e_zero", 4000)
    with pytest.raises(MicroArchError, match=r"e_zero must be between -2035 and 2037 for the "
                                             r"RTL's 12-bit exponents, not 4000$"):
        check_rtl(wide)
    assert microarch.RTL_EXP_WIDTH == 12


def test_spec_k_null_only_for_exact() -> None:
    """k = null means the exact unit; with a finite frac_bits there is no instruction to run
    (it crashed in check_vectors as ``K % None``)."""
    base = presets.get("hopper-wgmma").spec("e4m3")
    with pytest.raises(SpecError, match="k must be an integer from 1 to .* when frac_bits is "
                                        "set"):
        base.replace(k=None, schedule=None)
