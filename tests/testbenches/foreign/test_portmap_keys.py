"""The port-map keys that describe designs in their own terms (issue 34): ``[control]``,
``[status]``, ``[domain]``, ``scales.exponent``, a k per element format, and C and result
encodings the unit spec chooses. Every malformed use is refused in one line naming its map
line, exit 2, nothing simulated; the well-formed ones pack, decode and constrain stimulus as
documented (docs/foreign-rtl.md)."""

from dataclasses import replace

import numpy as np
import pytest
from cli_helpers import one_line, run
from portmap_helpers import FIXED, GOOD, MXFP8_K32, line_at, map_in, variant

from mxsim import vectors
from testbenches.foreign.portmap import MapError, load
from testbenches.foreign.portmap.codec import FLAG_BITS, compare_flags, decode_results
from testbenches.foreign.portmap.domain import Domain

CONTROL = '[control.rm]\nport = "fmt"\nfrom = "acc_rounding"\nvalues = { rne = 0, rz = 1 }\n'
DOMAIN = "[domain]\na_scale = [-32, 31]\nb_scale = [-32, 31]\nscale_sum = [-32, 31]\n"


def _refused(capsys, tmp_path, path, needle, text):
    out = tmp_path / "out"
    rc, _, err = run(capsys, "verify", "--rtl", path, "--unit", "exact", "--out", out)
    assert rc == 2, err
    one_line(err, text)
    line = line_at(path, needle) if needle is not None else None
    where = f"{path}:{line}: " if line is not None else f"{path}:"
    assert err.startswith(f"mxsim: error: {where}"), err
    written = [p.name for p in out.rglob("*") if p.is_file()] if out.exists() else []
    assert written == [], written


# (id, base, edits, the text whose line the message names, message)
CASES = [
    ("control-not-tables", GOOD, [("fmt = 0\n", ""), ("[result]", "[control]\nrm = 1\n\n[result]")],
     "[control]", "control must hold one table per control input"),
    ("control-from", GOOD, [("fmt = 0\n", ""), ("[result]", CONTROL.replace(
        '"acc_rounding"', '"rounding"') + "\n[result]")], 'from = "rounding"',
     "control.rm.from must be one of acc_rounding, c_rounding"),
    ("control-no-values", GOOD, [("fmt = 0\n", ""), ("[result]", CONTROL.replace(
        "{ rne = 0, rz = 1 }", "{}") + "\n[result]")], "values = {}",
     "control.rm.values must map acc_rounding values to the port values"),
    ("control-duplicate", GOOD, [("fmt = 0\n", ""), ("[result]", CONTROL.replace(
        "rz = 1", "rz = 0") + "\n[result]")], "values = {",
     "control.rm.values: rz and rne are both 0"),
    ("control-no-fit", GOOD, [("fmt = 0\n", ""), ("[result]", CONTROL.replace(
        'port = "fmt"', 'port = "fmt"\nbits = [0, 0]').replace("rz = 1", "rz = 2")
        + "\n[result]")], "values = {", "control.rm.values.rz = 2 does not fit the 1 bits"),
    ("control-spelling", GOOD, [("fmt = 0\n", ""), ("[result]", CONTROL.replace(
        "rne = 0", "RNE = 0") + "\n[result]")], "values = {",
     "write 'RNE' as a spec file spells it, 'rne'"),
    ("control-port-width", GOOD, [("fmt = 0\n", ""), ("[result]", CONTROL.replace(
        "rz = 1", "rz = 4") + "\n[result]")], "[control.rm]",
     "control.rm: port 'fmt' has 2 bits; the map needs at least 3"),
    ("control-driven-twice", GOOD, [("[result]", CONTROL + "\n[result]")], "[control.rm]",
     "control.rm overlaps tie.fmt in port 'fmt'"),
    ("status-empty", GOOD, [("[result]", "[status]\n\n[result]")], "[status]",
     "[status] maps no flag; give at least one of nv, dz, of, uf, nx"),
    ("status-unknown", GOOD, [("[result]", '[status]\nzz = { port = "out_nan" }\n\n[result]')],
     "zz =", "unknown key 'status.zz'; [status] takes nv, dz, of, uf, nx"),
    ("status-wide", GOOD, [("[result]", '[status]\nnx = { port = "out_mant", bits = [1, 0] }\n'
                                        '\n[result]')], "bits = [1, 0]",
     "status.nx.bits [1, 0] hold 2 bits; status.nx needs 1"),
    ("status-port-width", GOOD, [("[result]", '[status]\nnx = { port = "out_exp" }\n\n[result]')],
     "nx =", "status.nx: port 'out_exp' has 8 bits; the map needs exactly 1"),
    ("status-driven", GOOD, [("[result]", '[status]\nnx = { port = "rs3", bits = [60, 60] }\n'
                                          '\n[result]')], "nx =",
     "port 'rs3' is read and driven"),
    ("domain-empty", GOOD, [("[result]", "[domain]\n\n[result]")], "[domain]",
     "[domain] is empty; give at least one of a, b, c, a_scale"),
    ("domain-class", GOOD, [("[result]", '[domain]\na = ["zero", "big"]\n\n[result]')],
     "a = [", "domain.a must be a list of distinct classes among zero, subnormal, normal, max"),
    ("domain-range", GOOD, [("[result]", "[domain]\na_scale = [5, 1]\n\n[result]")],
     "a_scale =", "domain.a_scale must be [lo, hi], integers with -127 <= lo <= hi <= 127"),
    ("domain-sum-range", GOOD, [("[result]", "[domain]\nscale_sum = [0, 300]\n\n[result]")],
     "scale_sum =", "domain.scale_sum must be [lo, hi], integers with -254 <= lo <= hi <= 254"),
    ("domain-infeasible", GOOD, [("[result]", "[domain]\na_scale = [10, 20]\nb_scale = [10, 20]"
                                              "\nscale_sum = [-5, 5]\n\n[result]")],
     "scale_sum = [-5", "the domain's scale ranges admit no pair of scales"),
    ("domain-unknown", GOOD, [("[result]", "[domain]\nc_scale = [0, 1]\n\n[result]")],
     "c_scale", "unknown key 'domain.c_scale'; [domain] takes a, b, c, a_scale, b_scale"),
    ("exponent-bits", GOOD, [("per = \"instruction\"", "per = \"instruction\"\n"
                              "exponent = { bits = 1 }")], "exponent =",
     "scales.exponent.bits must be an integer >= 2 and <= 16, not 1"),
    ("exponent-no-domain", GOOD, [("per = \"instruction\"", "per = \"instruction\"\n"
                                   "exponent = { bits = 6 }")], "exponent =",
     "scales.exponent holds scale exponents -32..31 only; declare [domain] a_scale = [-32, 31]"),
    ("exponent-too-narrow-domain", GOOD, [("per = \"instruction\"", "per = \"instruction\"\n"
                                           "exponent = { bits = 6 }"),
                                          ("[result]", DOMAIN.replace("[-32, 31]\nb",
                                                                      "[-40, 31]\nb")
                                           + "\n[result]")], "exponent =",
     "declare [domain] a_scale = [-32, 31] (or narrower)"),
    ("exponent-unknown", GOOD, [("per = \"instruction\"", "per = \"instruction\"\n"
                                 "exponent = { width = 6 }")], "exponent =",
     "unknown key 'scales.exponent.width'; [scales.exponent] takes bits, signed, bias"),
    ("k-table-fixed", GOOD, [("k = 32", "k = { e4m3 = 32 }")], "k = {",
     "instruction.k is a table of element formats, but [format] selects none"),
    ("k-table-missing", FIXED, [("k = 32", "k = { e4m3 = 32 }")], "k = {",
     "instruction.k has no k for int8; give one for every format of format.values"),
    ("k-table-extra", FIXED, [("k = 32", "k = { e4m3 = 32, int8 = 32, e2m1 = 64 }")],
     "k = {", "instruction.k: 'e2m1' is not a format of format.values (int8, e4m3)"),
    ("k-table-value", FIXED, [("k = 32", "k = { e4m3 = 32, int8 = 0 }")], "k = {",
     "instruction.k.int8 must be an integer >= 1"),
    ("k-table-block", FIXED, [("k = 32", "k = { e4m3 = 32, int8 = 32 }")], 'per = "block"',
     "scales.per = 'block' needs one instruction.k"),
    ("result-list-one", GOOD, [('encoding = "fp32"', 'encoding = ["fp32"]')], "encoding = [",
     "result.encoding must be one of fp32, fp16, bf16, fixed, or a list of two or more"),
    ("result-list-fixed", GOOD, [('encoding = "fp32"', 'encoding = ["fp32", "fixed"]')],
     "encoding = [", "or a list of two or more of fp32, fp16, bf16"),
    ("acc-list-dup", GOOD, [('format = "fp32"\nport', 'format = ["bf16", "bf16"]\nport')],
     'format = ["bf16"', "accumulator.format must be one of fp32, fp16, bf16, or a list"),
]


@pytest.mark.parametrize("name,base,edits,needle,text", CASES, ids=[c[0] for c in CASES])
def test_malformed_keys_are_refused_in_one_line(capsys, tmp_path, name, base, edits, needle,
                                                text):
    _refused(capsys, tmp_path, variant(tmp_path, base, edits), needle, text)


# -- the spec against the map --------------------------------------------------------------

def test_control_value_missing_for_the_spec_is_one_line(tmp_path):
    pm = map_in(tmp_path, GOOD.replace("fmt = 0\n", "").replace("[result]", CONTROL.replace(
        ", rz = 1", "") + "\n[result]"))
    with pytest.raises(MapError) as exc:
        pm.check_spec(replace(MXFP8_K32, acc_rounding="rz"))
    msg = str(exc.value)
    assert "\n" not in msg and "control.rm sets acc_rounding to rne but unit 'coproc' has " \
                               "acc_rounding rz; add rz = VALUE" in msg, msg
    assert msg.startswith(f"{tmp_path / 'map.toml'}:{line_at(tmp_path / 'map.toml', '[control')}")


def test_status_refuses_a_spec_whose_flags_are_not_modelled(tmp_path):
    pm = map_in(tmp_path, GOOD.replace("[result]", '[status]\nnx = { port = "out_nan" }\n\n'
                                                   "[result]"))
    with pytest.raises(MapError, match=r"\[status\] checks flags, but unit 'coproc': "):
        pm.check_spec(replace(MXFP8_K32, frac_bits=20, acc_rounding="rz"))
    pm.check_spec(MXFP8_K32)                      # one exact step, rounded once: modelled


def test_result_and_c_encodings_follow_the_specs_d_format(tmp_path):
    text = GOOD.replace('encoding = "fp32"', 'encoding = ["fp32", "bf16"]').replace(
        'format = "fp32"\nport', 'format = ["fp32", "bf16"]\nport')
    pm = map_in(tmp_path, text)
    spec = replace(MXFP8_K32, d_format="bf16", acc_format="bf16")
    got = pm.resolve(spec)
    assert (got.result.encoding, got.accumulator.format) == ("bf16", "bf16")
    assert pm.resolve(MXFP8_K32).result.encoding == "fp32"
    with pytest.raises(MapError, match="accumulator.format is fp32 or bf16 but unit 'coproc' has "
                                       "d_format fp16"):
        pm.check_spec(replace(MXFP8_K32, d_format="fp16", acc_format="fp16"))
    # a BF16 code sits in the result field's low 16 bits
    raw = {"rd": np.array([[0x3F80], [0xFFC0]], np.uint32)}
    res = got.decode(raw)
    assert res.encoding == "bf16" and res.codes.tolist() == [0x3F80, 0xFFC0]
    with pytest.raises(ValueError, match="decodes after PortMap.resolve"):
        decode_results(pm, raw)


def test_k_per_format_gives_dense_lanes(tmp_path):
    text = FIXED.replace("k = 32", "k = { int8 = 32, e2m1 = 64 }").replace(
        "values = { int8 = 0, e4m3 = 1 }", "values = { int8 = 0, e2m1 = 1 }").replace(
        'port = "a_arr"\nlayout = "array"', 'port = "rs1"').replace(
        'port = "b_arr"\nlayout = "array"', 'port = "rs2"').replace(
        'per = "block"\nblock = 16\na = { port = "rs3", lsb = 0 }\nb = { port = "rs3", lsb = 16 }',
        'per = "instruction"\na = { port = "rs3", bits = [7, 0] }\nb = { port = "rs3", bits = '
        '[15, 8] }').replace("rs1 = 0\n", "a_arr = 0\nb_arr = 0\n")
    text = text.replace("rs2 = 0\n", "")
    pm = map_in(tmp_path, text)
    from mxsim.spec import UnitSpec
    fp4 = UnitSpec(name="fp4", a_format="e2m1", b_format="e2m1", scale_format="e8m0",
                   block=64, k=64, frac_bits=None, acc_format="fp32", acc_rounding="rne")
    got = pm.resolve(fp4)
    assert (got.k, got.a.count, got.a.width, got.a.stride) == (64, 64, 4, 4)
    vs = vectors.generate("uniform", a_format="e2m1", b_format="e2m1", m=1, n=1, k=64,
                          scale_format="e8m0", block=64, seed=3, with_c=False)
    beats = pm.pack(fp4, vs)
    words = beats.ports["rs1"][0]
    packed = sum(int(w) << (32 * i) for i, w in enumerate(words))
    assert [(packed >> (4 * i)) & 0xF for i in range(64)] == vs.a[0].tolist()
    int8 = replace(fp4, a_format="int8", b_format="int8", k=32, block=32)
    assert pm.resolve(int8).a.width == 8
    with pytest.raises(MapError, match="instruction.k is 64 for e2m1 but unit 'fp4' has k = 32"):
        pm.check_spec(replace(fp4, k=32, block=32))


# -- controls, status flags ------------------------------------------------------------------

def test_controls_are_driven_with_the_specs_value(tmp_path):
    pm = map_in(tmp_path, GOOD.replace("fmt = 0\n", "").replace("[result]",
                                                                 CONTROL + "\n[result]"))
    vs = vectors.generate("uniform", m=2, n=3, k=32, scale_format="e8m0", block=32, seed=1)
    assert pm.pack(MXFP8_K32, vs).ports["fmt"][:, 0].tolist() == [0] * 6
    assert pm.pack(replace(MXFP8_K32, acc_rounding="rz"), vs).ports["fmt"][:, 0].tolist() == \
        [1] * 6


def test_status_flags_decode_and_compare(tmp_path):
    text = GOOD.replace("[result]", '[status]\nnx = { port = "out_mant", bits = [0, 0] }\n'
                                    'of = { port = "out_mant", bits = [2, 2] }\n\n[result]')
    pm = map_in(tmp_path, text)
    raw = {"rd": np.zeros((3, 1), np.uint32), "out_mant": np.array([[0b101], [0b001], [0]],
                                                                   np.uint32)}
    res = pm.decode(raw)
    assert res.flag_mask == FLAG_BITS["nx"] | FLAG_BITS["of"]
    assert res.flags.tolist() == [0x05, 0x01, 0x00]
    # flags the map does not read (NV here) are not compared
    want = np.array([0x05 | 0x10, 0x05, 0x00], np.uint8)
    bad = compare_flags(res, want)
    assert [(m.dot, m.rtl, m.model) for m in bad] == [(1, "flags OF|NX", "flags NX")] or \
        [(m.dot, m.rtl, m.model) for m in bad] == [(1, "flags NX", "flags OF|NX")]


# -- the domain --------------------------------------------------------------------------

NARROW = Domain(a=("zero", "normal", "subnormal"), b=("zero", "normal", "max"),
                a_scale=(-32, 31), b_scale=(-32, 31), scale_sum=(-32, 31))


@pytest.mark.parametrize("family", ["uniform", "specials", "llm", "cancellation"])
def test_constrained_stimulus_is_inside_and_reaches_the_edges(family):
    vs = vectors.generate(family, m=16, n=16, k=64, scale_format="e8m0", block=32, seed=7)
    if family == "specials":
        assert NARROW.first_outside(vs) is not None
    got = NARROW.constrain(vs, seed=11)
    assert got.num_dots == vs.num_dots and NARROW.first_outside(got) is None
    sums = (got.a_scale.astype(int) - 127).reshape(-1, 2) + \
        (got.b_scale.astype(int) - 127).reshape(-1, 2)
    assert sums.max() == 31 and sums.min() == -32
    # dots already inside keep their codes
    again = NARROW.constrain(got, seed=12)
    assert np.array_equal(again.a, got.a) and np.array_equal(again.b, got.b)


def test_first_outside_names_the_dot_and_the_rule():
    vs = vectors.generate("uniform", m=1, n=4, k=32, scale_format="e8m0", block=32, seed=2,
                          with_c=False)
    ok = NARROW.constrain(vs, seed=1)
    a_scale = ok.a_scale.copy()
    b_scale = ok.b_scale.copy()
    a_scale[...] = 127 + 20                         # ok is 4 dots of 1 x 1: (4, 1, 1)
    b_scale[...] = 127 + 11
    b_scale[2] = 127 + 12                           # dot 2: 20 + 12 = 32 > 31
    bad = ok.replace(a_scale=a_scale, b_scale=b_scale)
    assert NARROW.first_outside(bad) == "dot 2: a block's scale exponents sum to 32, outside " \
                                        "scale_sum [-32, 31]"
    codes = ok.a.copy()
    codes[0, 0, 5] = 0x7F                           # E4M3 NaN
    assert NARROW.first_outside(ok.replace(a=codes)).startswith(
        "dot 0: A holds a nan element (a allows zero, normal, subnormal)")


def test_unreachable_bins():
    got = NARROW.unreachable()
    assert got["a_class"] == {"max", "nan", "inf"} and got["b_class"] == {"subnormal", "nan",
                                                                          "inf"}
    assert got["scale_class"] == {"nan", "min", "max"}
    assert got["special_case"] == {"nan-operand", "inf-times-zero", "inf-minus-inf",
                                   "inf-only"}


def test_exponent_scales_pack_and_refuse_what_does_not_fit(tmp_path):
    text = GOOD.replace('per = "instruction"', 'per = "instruction"\nexponent = { bits = 6 }')
    text = text.replace("[39, 32]", "[37, 32]").replace("[47, 40]", "[45, 40]")
    text = text.replace("[result]", DOMAIN + "\n[result]")
    pm = map_in(tmp_path, text)
    assert pm.scales.exponent.exponents == (-32, 31)
    vs = vectors.generate("uniform", m=3, n=3, k=32, scale_format="e8m0", block=32, seed=5)
    vs = pm.domain.constrain(vs, seed=9)
    words = pm.pack(MXFP8_K32, vs).ports["rs3"]
    got_a = ((words[:, 1] >> 0) & 0x3F).astype(int)
    want = (vs.a_scale.reshape(-1).astype(int) - 127) & 0x3F
    assert got_a.tolist() == want.tolist()
    bad = vs.a_scale.copy()
    bad[4] = 127 + 40
    with pytest.raises(MapError, match=r"instruction 4 has a scale of A the design cannot take "
                                       r"\(exponent 40; scales.exponent holds -32..31\)"):
        pm.pack(MXFP8_K32, vs.replace(a_scale=bad))


def test_replay_outside_the_domain_is_refused(capsys, tmp_path):
    text = GOOD.replace("[result]", DOMAIN + "\n[result]")
    path = variant(tmp_path, GOOD, [("[result]", DOMAIN + "\n[result]")])
    assert load(path).domain is not None and text
    vs = vectors.generate("uniform", m=1, n=2, k=32, scale_format="e8m0", block=32, seed=4)
    a_scale = vs.a_scale.copy()
    a_scale[...] = 200
    replay = tmp_path / "replay.npz"
    vectors.save(vs.replace(a_scale=a_scale), replay)
    spec = tmp_path / "coproc.toml"
    spec.write_text(MXFP8_K32.dumps())
    out = tmp_path / "out"
    rc, _, err = run(capsys, "verify", "--rtl", path, "--unit", spec, "--replay", replay,
                     "--out", out)
    assert rc == 2
    one_line(err, "the vector set is outside [domain]: dot 0: A has scale exponent 73, outside "
                  "a_scale [-32, 31]")


# -- lanes across ports ------------------------------------------------------------------

STRADDLE = [('[operands.a]\nport = "rs1"', '[operands.a]\nport = ["rs3", "rs1"]'),
            ('k = 32\na_format = "e4m3"\nb_format = "e4m3"',
             'k = 40\na_format = "e3m2"\nb_format = "e3m2"'),
            ('[scales]\nformat = "e8m0"\nper = "instruction"\na = { port = "rs3", bits = [39, 32] }'
             '\nb = { port = "rs3", bits = [47, 40] }', '[scales]\nformat = "none"'),
            ('[accumulator]\nkind = "port"\nformat = "fp32"\nport = "rs3"\nbits = [31, 0]',
             '[accumulator]\nkind = "none"')]


def test_lanes_straddle_two_ports(tmp_path):
    from testbenches.foreign.portmap.ports import design_ports
    path = variant(tmp_path, GOOD, STRADDLE)
    pm = load(path)
    assert pm.a.concat == ("rs3", "rs1") and pm.a.port_names() == ["rs3", "rs1"]
    pm.check_ports(design_ports(pm, tmp_path / "ports"))
    from mxsim.spec import UnitSpec
    spec = UnitSpec(name="fp6", a_format="e3m2", b_format="e3m2", k=40, frac_bits=None,
                    acc_format="fp32", acc_rounding="rne")
    vs = vectors.generate("uniform", a_format="e3m2", b_format="e3m2", m=2, n=1, k=40, seed=8,
                          with_c=False)
    beats = pm.pack(spec, vs)
    lo = [sum(int(w) << (32 * j) for j, w in enumerate(row)) for row in beats.ports["rs3"]]
    hi = [sum(int(w) << (32 * j) for j, w in enumerate(row)) for row in beats.ports["rs1"]]
    for r in range(2):
        whole = lo[r] | (hi[r] << 64)               # rs3 is 64 bits, the least significant
        assert [(whole >> (6 * i)) & 0x3F for i in range(40)] == vs.a[r].tolist()
        assert (lo[r] >> 60) & 0xF == vs.a[r, 10] & 0xF     # lane 10 straddles bit 64


def test_lanes_across_ports_malformed(capsys, tmp_path):
    path = variant(tmp_path, GOOD, STRADDLE[1:] + [('[operands.a]\nport = "rs1"',
                                                    '[operands.a]\nport = ["rs1"]')])
    _refused(capsys, tmp_path, path, 'port = ["rs1"]',
             "operands.a.port as a list names two or more distinct ports")
    path = variant(tmp_path, GOOD, STRADDLE[1:] + [('[operands.a]\nport = "rs1"',
                                                    '[operands.a]\nport = ["rs3", "rs1"]\n'
                                                    'lsb = 100')])
    _refused(capsys, tmp_path, path, 'port = ["rs3"',
             "operands.a: ports rs3, rs1 hold 320 bits together, the lanes use bit 339")


# -- INT8 codes read as whole integers -------------------------------------------------------

def test_int8_integer_sends_scales_smaller(tmp_path):
    text = FIXED.replace("k = 32\n", 'k = 32\nint8 = "integer"\n')
    pm = map_in(tmp_path, text)
    assert pm.int8_integer
    from mxsim.spec import UnitSpec
    spec = UnitSpec(name="i8", a_format="int8", b_format="int8", scale_format="e8m0", block=16,
                    k=32, frac_bits=None, acc_format="fp32", acc_rounding="rne")
    vs = vectors.generate("uniform", a_format="int8", b_format="int8", m=2, n=2, k=32,
                          scale_format="e8m0", block=16, seed=3, with_c=False)
    a_scale = np.clip(vs.a_scale, 6, 254)
    vs = vs.replace(a_scale=a_scale, b_scale=np.clip(vs.b_scale, 6, 254))
    words = pm.pack(spec, vs).ports["rs3"]
    got = [(int(w[0]) >> 0) & 0xFF for w in words]
    assert got == [int(x) - 6 for x in np.repeat(vs.a_scale[:, 0], 2)]
    low = vs.a_scale.copy()
    low[1, 0] = 5
    with pytest.raises(MapError, match="instruction 2 has a scale of A that cannot be sent 2"):
        pm.pack(spec, vs.replace(a_scale=low))
    e4m3 = replace(spec, a_format="e4m3", b_format="e4m3")
    vs8 = vectors.generate("uniform", m=1, n=1, k=32, scale_format="e8m0", block=16, seed=3,
                           with_c=False)
    assert pm.pack(e4m3, vs8).ports["rs3"][0, 0] & 0xFF == vs8.a_scale[0, 0]   # not INT8


def test_int8_integer_malformed(capsys, tmp_path):
    path = variant(tmp_path, GOOD, [("k = 32\n", 'k = 32\nint8 = "integer"\n')])
    _refused(capsys, tmp_path, path, "int8 =", "instruction.int8 says how INT8 codes are read, "
                                               "but the design takes e4m3")
    path = variant(tmp_path, FIXED, [("k = 32\n", 'k = 32\nint8 = "whole"\n')])
    _refused(capsys, tmp_path, path, 'int8 = "whole"', "instruction.int8 must be one of mx, "
                                                       "integer")


def test_lanes_across_ports_may_end_at_the_last_bit(tmp_path):
    """Lanes 8 bits apart but 6 wide end 2 bits below their last stride: at lsb 2, 40 of them
    end at bit 319, the last of rs3 + rs1's 320."""
    from testbenches.foreign.portmap.ports import design_ports
    path = variant(tmp_path, GOOD, STRADDLE[1:] + [('[operands.a]\nport = "rs1"',
                                                    '[operands.a]\nport = ["rs3", "rs1"]\n'
                                                    'lsb = 2\nstride = 8')])
    pm = load(path)
    pm.check_ports(design_ports(pm, tmp_path / "ports"))
    assert pm.a.top == 319
