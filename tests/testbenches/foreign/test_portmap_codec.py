"""Port maps' values (testbenches.foreign.portmap): every instruction packed, against hdl.payload's
packer for mxsim's own unit and bit by bit against references for every layout; results decoded
and compared bit for bit (FP32/FP16/BF16) or exactly in value with ulps (fixed point)."""

from dataclasses import replace

import numpy as np
import pytest
from portmap_helpers import FIXED, GOOD, MAPS, MXFP8_K32, line_at, map_in

from mxsim import presets, vectors
from testbenches.foreign.portmap import MapError, load
from testbenches.foreign.portmap.ports import Port, design_ports


@pytest.fixture(scope="module")
def dut_ports(tmp_path_factory) -> dict[str, Port]:
    """dut.sv's ports, read once for the module."""
    return design_ports(load(MAPS / "good.toml"), tmp_path_factory.mktemp("ports"))


# -- packing -----------------------------------------------------------------------------

#: mxsim's generated MXFP8 unit (k = 32) behind a port map.
MX_UNIT = (MAPS / "mx_unit.toml").read_text()
MXFP8 = presets.get("blackwell-mxf8f6f4").spec("e4m3", scale_format="e8m0", block=32)


def _ints(words: np.ndarray) -> list[int]:
    """Each row of (n, words) uint32 as one integer."""
    return [sum(int(w) << (32 * j) for j, w in enumerate(row)) for row in words]


@pytest.mark.parametrize("k", [32, 96])
def test_pack_is_the_generated_units_payload(tmp_path, k):
    from hdl.payload import payload_words
    pm = map_in(tmp_path, MX_UNIT)
    vs = vectors.generate("uniform", m=3, n=5, k=k, batch=(2,), scale_format="e8m0", block=32,
                          seed=k)
    beats = pm.pack(MXFP8, vs)
    assert list(beats.ports) == ["i__payload"] and beats.per_dot == k // 32
    assert beats.ports["i__payload"].dtype == np.uint32
    assert np.array_equal(beats.ports["i__payload"], payload_words(MXFP8, vs))
    assert beats.last.tolist() == [s == k // 32 - 1 for _ in range(30) for s in range(k // 32)]
    assert pm.driven_ports() == ["i__payload", "i__valid", "o__ready"]
    assert pm.read_ports() == ["o__payload", "i__ready", "o__valid"]


def test_pack_packed_fields_bit_by_bit(dut_ports):
    pm = load(MAPS / "good.toml")
    pm.check_ports(dut_ports)
    vs = vectors.generate("uniform", m=2, n=3, k=32, batch=(2,), scale_format="e8m0",
                          block=32, seed=3)
    beats = pm.pack(MXFP8, vs)
    assert {name: w.shape for name, w in beats.ports.items()} == {
        "rs1": (12, 8), "rs2": (12, 8), "rs3": (12, 2), "fmt": (12, 1), "a_arr": (12, 32, 1),
        "b_arr": (12, 32, 1)}
    # The tied inputs hold their value (0) in every instruction, each array element too.
    assert not any(beats.ports[name].any() for name in ("fmt", "a_arr", "b_arr"))
    got = {name: _ints(beats.ports[name]) for name in ("rs1", "rs2", "rs3")}
    n = 0
    for t in range(2):
        for i in range(2):
            for j in range(3):
                a, b = vs.a[t, i], vs.b[t, :, j]
                assert got["rs1"][n] == sum(int(a[x]) << (8 * x) for x in range(32))
                # order = "msb-first": lane 0 in the top byte.
                assert got["rs2"][n] == sum(int(b[x]) << (8 * (31 - x)) for x in range(32))
                assert got["rs3"][n] == (int(vs.c[t, i, j]) | int(vs.a_scale[t, i, 0]) << 32
                                         | int(vs.b_scale[t, 0, j]) << 40)
                n += 1


def test_pack_holds_tied_ports_at_their_value(tmp_path, dut_ports):
    """[tie]: a value of any width in every instruction, in every element of an array port."""
    pm = map_in(tmp_path, FIXED.replace("rs1 = 0", f"rs1 = {2 ** 60 + 5}").replace(
        "rs2 = 0", "rs2 = 0xFFFFFFFF"))
    pm.check_ports(dut_ports)
    vs = vectors.generate("uniform", m=1, n=3, k=32, scale_format="e8m0", block=16,
                          with_c=False, seed=5)
    beats = pm.pack(replace(MXFP8_K32, block=16), vs)
    assert _ints(beats.ports["rs1"]) == [2 ** 60 + 5] * 3 and beats.ports["rs1"].shape == (3, 8)
    assert _ints(beats.ports["rs2"]) == [0xFFFFFFFF] * 3
    assert _ints(beats.ports["rst_n"]) == [1] * 3
    grid = map_in(tmp_path, GOOD.replace("a_arr = 0", "a_arr = 7"), "good.toml")
    grid.check_ports(dut_ports)
    vs = vectors.generate("uniform", m=1, n=2, k=32, scale_format="e8m0", block=32, seed=5)
    arr = grid.pack(MXFP8, vs).ports["a_arr"]
    assert arr.shape == (2, 32, 1) and (arr == 7).all()


@pytest.mark.parametrize("fmt, select", [("int8", 0), ("e4m3", 1)])
def test_pack_arrays_block_scales_and_format_port(dut_ports, fmt, select):
    pm = load(MAPS / "fixed.toml")
    pm.check_ports(dut_ports)
    spec = replace(MXFP8_K32, a_format=fmt, b_format=fmt, block=16)
    vs = vectors.generate("uniform", a_format=fmt, m=2, n=2, k=32, scale_format="e8m0",
                          block=16, with_c=False, seed=5)
    beats = pm.pack(spec, vs)
    assert beats.ports["a_arr"].shape == (4, 32, 1)
    assert np.array_equal(beats.ports["a_arr"][:, :, 0], np.repeat(vs.a, 2, axis=0))
    assert np.array_equal(beats.ports["b_arr"][:, :, 0], np.tile(vs.b.T, (2, 1)))
    assert beats.ports["fmt"].tolist() == [[select]] * 4
    rs3 = _ints(beats.ports["rs3"])
    for n, (i, j) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        sa, sb = vs.a_scale[i], vs.b_scale[:, j]
        assert rs3[n] == (int(sa[0]) | int(sa[1]) << 8 | int(sb[0]) << 16 | int(sb[1]) << 24)


def test_pack_lane_ports_and_internal_accumulator(tmp_path):
    text = FIXED.replace('port = "a_arr"\nlayout = "array"', 'port = "a{i}"\nlayout = "ports"')
    text = text.replace('kind = "none"', 'kind = "internal"\nclear = { port = "ctl", bits = [0, 0] '
                                         '}\nlast = { port = "ctl", bits = [3, 3] }')
    text = text.replace('b = { port = "rs3", lsb = 16 }',
                        'b = { port = "rs3", lsb = 16, order = "msb-first", stride = 12 }')
    pm = map_in(tmp_path, text)
    assert pm.data_ports() == [f"a{i}" for i in range(32)] + ["b_arr", "rs3", "ctl", "fmt",
                                                              "rst_n", "out_ready", "rs1", "rs2"]
    spec = replace(MXFP8_K32, block=16)
    vs = vectors.generate("uniform", m=1, n=2, k=96, scale_format="e8m0", block=16,
                          with_c=False, seed=7)
    beats = pm.pack(spec, vs)
    assert beats.per_dot == 3 and beats.last.tolist() == [False, False, True] * 2
    assert beats.ports["ctl"][:, 0].tolist() == [1, 0, 8] * 2
    for n in range(6):
        j, step = divmod(n, 3)
        assert [int(beats.ports[f"a{x}"][n, 0]) for x in range(32)] == \
            vs.a[0, 32 * step:32 * step + 32].tolist()
        sb = vs.b_scale[2 * step:2 * step + 2, j]
        # Two lanes, 12 bits apart, lane 0 at the top: bits [35, 28] and [23, 16].
        assert _ints(beats.ports["rs3"])[n] >> 16 == int(sb[1]) | int(sb[0]) << 12


@pytest.mark.parametrize("name, kwargs, needle, text", [
    ("good", dict(k=64), "[accumulator]",
     "the vector set has K = 64; the design needs k = 32 (one instruction per dot product: "
     "no first/last in [accumulator])"),
    ("good", dict(b_format="e5m2"), "k = 32",
     "the vector set holds e4m3 x e5m2; the design takes e4m3"),
    ("good", dict(block=16), "[scales]",
     "the vector set has e8m0 scales per 16 elements; the design takes e8m0 scales per "
     "instruction"),
    ("fixed", dict(block=16), "[accumulator]",
     "the design has no C input (accumulator.kind = 'none': C is +0) but the vector set's C "
     "is not +0"),
])
def test_pack_refuses_a_set_that_does_not_fit(name, kwargs, needle, text):
    path = MAPS / f"{name}.toml"
    spec = replace(MXFP8_K32, block=16) if name == "fixed" else MXFP8_K32
    vs = vectors.generate("uniform", **{"m": 1, "n": 1, "k": 32, "scale_format": "e8m0",
                                        "block": 32, **kwargs})
    with pytest.raises(MapError) as info:
        load(path).pack(spec, vs)
    assert str(info.value).startswith(f"{path}:{line_at(path, needle)}: {text}")


# -- decoding and comparing --------------------------------------------------------------


def _f32(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def _raw(fields: dict[str, list[int]]) -> dict[str, np.ndarray]:
    return {port: np.array(values, np.uint32).reshape(-1, 1) for port, values in fields.items()}


# fixed.toml's result: a 16-bit two's complement mantissa (whole port), an 8-bit exponent field
# with offset 141 (value = mant * 2**(field - 141)) and a NaN flag.
# (mantissa bits, exponent field, nan flag, the model's FP32 code, the mismatch or None)
FIXED_CASES = [
    (16384, 141, 0, _f32(16384.0), None),
    (0xC000, 127, 0, _f32(-1.0), None),                          # -16384 * 2**-14
    (24576, 127, 0, _f32(1.5), None),
    (0xFFFF, 138, 0, _f32(-0.125), None),                        # -1 * 2**-3
    (0, 0, 0, 0x80000000, None),                                 # +0 equals -0
    (0, 200, 1, 0x7FC00000, None),                               # NaN equals NaN
    (0, 200, 1, 0xFFC00001, None),                               # any NaN code
    (16385, 127, 0, _f32(1.0), ("16385·2^-14", "1·2^0",
                                "+1 ulps (ulp 2^-14 of the design's 15-bit mantissa); model "
                                "fp32 0x3f800000")),
    (0xBFFE, 127, 0, _f32(-1.0), ("-16386·2^-14", "-1·2^0",
                                  "-2 ulps (ulp 2^-14 of the design's 15-bit mantissa); model "
                                  "fp32 0xbf800000")),
    (3, 0, 0, 0, ("3·2^-141", "0·2^0", "+3 ulps (ulp 2^-141 of the design's 15-bit mantissa)")),
    (1, 0, 0, 0x200, ("1·2^-141", "1·2^-140",                    # 2**-140, an FP32 subnormal
                      "-1 ulps (ulp 2^-141 of the design's 15-bit mantissa)")),
    (0x7FFF, 127, 0, _f32(2.0), ("32767·2^-14", "1·2^1",     # just below 2.0's binade
                                 "-0.5 ulps (ulp 2^-13 of the design's 15-bit mantissa)")),
    (0x7FFF, 255, 0, 0x7F800000, ("32767·2^114", "+Inf",
                                  "the design's encoding has no Inf (model fp32 0x7f800000)")),
    (16384, 141, 1, _f32(16384.0), ("NaN", "1·2^14", "the design flags NaN (model fp32 "
                                                      "0x46800000)")),
    (16384, 141, 0, 0x7FC00000, ("16384·2^0", "NaN", "the model's result is NaN (model fp32 "
                                                     "0x7fc00000)")),
]


@pytest.fixture
def fixed_map(dut_ports):
    pm = load(MAPS / "fixed.toml")
    pm.check_ports(dut_ports)
    return pm


def test_fixed_results_compare_exactly_in_value(fixed_map):
    raw = _raw({"out_mant": [c[0] for c in FIXED_CASES], "out_exp": [c[1] for c in FIXED_CASES],
                "out_nan": [c[2] for c in FIXED_CASES]})
    results = fixed_map.decode(raw)
    assert (results.precision, results.e_min) == (15, -141)
    assert results.mant[:4].tolist() == [16384, -16384, 24576, -1]
    assert results.exp[:4].tolist() == [0, -14, -14, -3]
    want = np.array([c[3] for c in FIXED_CASES], np.uint32)
    got = fixed_map.compare(results, want)
    expect = [(i, c[4]) for i, c in enumerate(FIXED_CASES) if c[4] is not None]
    assert [m.dot for m in got] == [i for i, _ in expect]
    for m, (_, (rtl, model, note)) in zip(got, expect, strict=True):
        assert m.kind.value == "value" and (m.rtl, m.model) == (rtl, model)
        assert m.note.startswith(note), m.note


def test_fixed_fp32_codes(fixed_map):
    raw = _raw({"out_mant": [16384, 0xC000, 16385, 0, 0x7FFF, 5], "out_exp": [141, 127, 127, 9, 255,
                                                                          141],
                "out_nan": [0, 0, 0, 0, 0, 1]})
    codes = fixed_map.decode(raw).fp32_codes()
    assert codes.tolist() == [_f32(16384.0), _f32(-1.0), _f32(1 + 2 ** -14), 0, 0x7F800000,
                              0x7FC00000]


def test_sign_magnitude_and_signed_exponent(tmp_path):
    text = FIXED.replace('mantissa = { port = "out_mant", signed = true }',
                         'mantissa = { port = "out_mant", bits = [15, 0], sign_magnitude = true }')
    text = text.replace("bits = [7, 0], offset = 141", "bits = [7, 0], signed = true, offset = 3")
    pm = map_in(tmp_path, text)
    results = pm.decode(_raw({"out_mant": [0x8005, 0x0005, 0x8000, 0x7FFF],
                              "out_exp": [0xFE, 0x7F, 0x80, 0x00], "out_nan": [0, 0, 0, 0]}))
    assert results.mant.tolist() == [-5, 5, 0, 32767]
    assert results.exp.tolist() == [-5, 124, -131, -3]
    assert (results.precision, results.e_min) == (15, -131)
    want = np.array([_f32(-5 * 2.0 ** -5), _f32(5 * 2.0 ** 124), 0x80000000,
                     _f32(32767 / 8)], np.uint32)
    assert pm.compare(results, want) == []


def test_whole_port_signed_mantissa_needs_the_designs_width():
    pm = load(MAPS / "fixed.toml")
    with pytest.raises(ValueError, match="call PortMap.check_ports first"):
        pm.decode(_raw({"out_mant": [1], "out_exp": [1], "out_nan": [0]}))


def test_fp_results_compare_bit_for_bit(dut_ports, tmp_path):
    pm = load(MAPS / "good.toml")
    pm.check_ports(dut_ports)
    results = pm.decode(_raw({"rd": [_f32(1.0), 0, 0x7FC00000, _f32(2.0)]}))
    assert results.fp32_codes().tolist() == [_f32(1.0), 0, 0x7FC00000, _f32(2.0)]
    got = pm.compare(results, np.array([_f32(1.0), 0x80000000, 0x7FC00000, _f32(2.0)],
                                       np.uint32))
    assert [(m.dot, m.rtl, m.model) for m in got] == [(1, "0x00000000", "0x80000000")]
    short = pm.compare(results, np.array([_f32(1.0)] * 6, np.uint32))
    assert short[0].note == "4 of 6 results were read" and short[0].dot is None
    assert [m.dot for m in short[1:]] == [1, 2, 3]

    half = map_in(tmp_path, GOOD.replace('encoding = "fp32"', 'encoding = "fp16"').replace(
        'port = "rd"', 'port = "rd"\nbits = [15, 0]'))
    results = half.decode(_raw({"rd": [0xABCD3C00, 0x0001]}))
    assert results.codes.tolist() == [0x3C00, 0x0001]
    assert results.fp32_codes().tolist() == [_f32(1.0), _f32(2.0 ** -24)]
    got = half.compare(results, np.array([0x3C00, 0x8001], np.uint16), d_format="fp16")
    assert [(m.dot, m.rtl, m.model) for m in got] == [(1, "0x0001", "0x8001")]


def test_value_mismatches_are_listed_up_to_the_limit(fixed_map):
    n = 25
    results = fixed_map.decode(_raw({"out_mant": [16385] * n, "out_exp": [127] * n,
                                     "out_nan": [0] * n}))
    got = fixed_map.compare(results, np.full(n, _f32(1.0), np.uint32))
    assert [m.dot for m in got[:-1]] == list(range(20))
    assert (got[-1].note, got[-1].unlisted) == ("... 5 more, not listed (25 in all)", 5)




def test_simulator_integers_round_trip(dut_ports):
    from testbenches.foreign.portmap import port_words
    pm = load(MAPS / "fixed.toml")
    pm.check_ports(dut_ports)
    vs = vectors.generate("uniform", m=1, n=2, k=32, scale_format="e8m0", block=16,
                          with_c=False, seed=9)
    beats = pm.pack(replace(MXFP8_K32, block=16), vs)
    assert beats.ints("a_arr") == [vs.a[0].tolist()] * 2
    rs3 = beats.ints("rs3")
    assert port_words(rs3, 64).tolist() == beats.ports["rs3"].tolist()
    wide = [(1 << 70) + 5, 3]
    assert port_words(wide, 71).tolist() == [[5, 0, 64], [3, 0, 0]]
    decoded = pm.decode({"out_mant": port_words([0xC000], 16), "out_exp": port_words([127], 8),
                         "out_nan": port_words([0], 1)})
    assert (decoded.mant.tolist(), decoded.exp.tolist()) == ([-16384], [-14])
