"""``mxsim export-c``: the C library of every spec of every preset, compiled with -Werror, held
code for code equal to the fast engine (and on a sample to the reference engine) on every
generator family; spec fields no preset uses; the example designs' own specs; the trace."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from mxsim import presets, units
from mxsim.engine import reference
from mxsim.errors import MxsimError
from mxsim.export import default_prefix, export, files_of
from mxsim.export.build import STRICT, Library, compile_library, compilers
from mxsim.export.check import check, families_for, vector_sets

ROOT = Path(__file__).resolve().parents[3]


def every_spec() -> list[tuple[str, object]]:
    """(preset, spec) for every operand pair, scale pattern, C format and granularity."""
    return [(name, spec) for name, p in presets.PRESETS.items() for spec in p.all_specs()]


SPECS = every_spec()


def _library(folder: Path, specs, prefixes=None, opt="-O1") -> Path:
    for n, spec in enumerate(specs):
        prefix = prefixes[n] if prefixes else default_prefix(spec)
        for name, text in files_of(spec, prefix, source="test").items():
            (folder / name).write_text(text)
    return compile_library(folder, folder / "lib.so", opt=opt)


@pytest.fixture(scope="module")
def all_units(tmp_path_factory) -> Path:
    """One library of every spec of every preset (476 units), compiled with -Werror."""
    return _library(tmp_path_factory.mktemp("all"), [s for _, s in SPECS])


def test_every_preset_has_specs_and_unique_prefixes():
    assert {name for name, _ in SPECS} == set(presets.names())
    assert len({default_prefix(s) for _, s in SPECS}) == len(SPECS)


@pytest.mark.parametrize("preset", presets.names())
def test_every_spec_of_a_preset_equals_the_fast_engine(all_units, preset):
    """Every spec of the preset, one set of every family that applies (16 dots each; 128 with
    block-wise FP32 scales), its first spec on 2,000 dots: 0 mismatches."""
    specs = [s for name, s in SPECS if name == preset]
    for n, spec in enumerate(specs):
        lib = Library(all_units, default_prefix(spec), spec)
        per_set = 128 if spec.scale_format == "fp32" and spec.block == 128 else 16
        dots = 2000 if n == 0 else per_set * len(families_for(spec))
        r = check(spec, lib, dots, seed=n)
        assert r.mismatches == 0, (default_prefix(spec), r.first)
        assert set(r.per_family) == set(families_for(spec))


def _variants():
    base = {n: units.get(n).spec_for_formats(None, None) for n in (
        "hopper-wgmma", "blackwell-mxf8f6f4", "blackwell-mxf4nvf4", "ocp-fp32")}
    tree = {"reduce": "tree", "frac_bits": None, "c_mode": "after"}
    rows = [("hopper-wgmma", {"align": a}) for a in ("rd", "rne", "rz-jam")]
    rows += [("blackwell-mxf4nvf4", {"align": a}) for a in ("rd", "rne", "rz-jam")]
    rows += [("hopper-wgmma", {"acc_rounding": r}) for r in ("ru", "rd", "rna", "rne")]
    rows += [("ocp-fp32", {"c_rounding": r}) for r in ("ru", "rd", "rna", "rz")]
    rows += [
        ("hopper-wgmma", {"product": "normalized"}), ("hopper-wgmma", {"specials": "none"}),
        ("blackwell-mxf4nvf4", {"specials": "none"}), ("hopper-wgmma", {"overflow": "saturate"}),
        ("hopper-wgmma", {"overflow": "ieee", "zero_sign": "ieee"}),
        ("ocp-fp32", {"zero_sign": "c"}), ("hopper-wgmma", {"nan_code": 0x7FC00000}),
        ("blackwell-mxf8f6f4", {"scale_sum_bits": 8}),
        ("blackwell-mxf8f6f4", {"scale_sum_bits": 8, "scale_sum_overflow": "saturate"}),
        ("blackwell-mxf4nvf4", tree),
        ("blackwell-mxf4nvf4", tree | {"tree_formats": ("fp32", "e8m13"), "acc_rounding": "rne"}),
        ("blackwell-mxf4nvf4", tree | {"zero_sign": "c"}),
        ("hopper-wgmma", {"promote_every": 2, "promote_rounding": "rz"}),
        ("hopper-wgmma", {"frac_bits": None}), ("hopper-wgmma", {"frac_bits": 40}),
        ("hopper-wgmma", {"c_mode": "after", "c_rounding": "rz"}),
        ("hopper-wgmma", {"e_zero": -10}),
        ("hopper-wgmma", {"schedule": tuple(tuple(range(i, i + 8)) for i in range(0, 32, 8)),
                          "acc_format": "fp32"}),
        ("blackwell-mxf8f6f4", {"block": 16})]
    return [base[n].replace(name=f"variant{i}", **kw) for i, (n, kw) in enumerate(rows)]


def test_spec_fields_no_preset_uses_equal_the_fast_engine(tmp_path):
    """Alignments, roundings, overflow, zero signs, NaN codes, held scale sums, trees with
    their own level formats, promotions, schedules: 1,500 dots each."""
    specs = _variants()
    prefixes = [f"variant{i}" for i in range(len(specs))]
    lib = _library(tmp_path, specs, prefixes)
    for prefix, spec in zip(prefixes, specs, strict=True):
        r = check(spec, Library(lib, prefix, spec), 1500, seed=3)
        assert r.mismatches == 0, (prefix, r.first)


def test_the_example_designs_specs_equal_the_fast_engine(tmp_path):
    """Users' specs: examples/rtl's documented specs and examples/my_unit.toml."""
    paths = sorted((ROOT / "examples" / "rtl").glob("*/*spec*.toml")) + [
        ROOT / "examples" / "my_unit.toml"]
    specs = [units.get(str(p)).spec_for_formats(None, None) for p in paths]
    prefixes = [f"example{i}" for i in range(len(specs))]
    lib = _library(tmp_path, specs, prefixes)
    for prefix, spec in zip(prefixes, specs, strict=True):
        r = check(spec, Library(lib, prefix, spec), 1500, seed=5)
        assert r.mismatches == 0, (prefix, spec.name, r.first)


@pytest.mark.parametrize("preset", ["hopper-wgmma", "blackwell-mxf4nvf4", "ocp-fp32", "exact",
                                    "hopper-cublas-blockwise", "triton-dot-scaled-hopper",
                                    "hopper-cublas-rowwise", "hopper-mma-f16"])
def test_a_sample_equals_the_reference_engine(all_units, preset):
    """The reference engine (Python fractions), on one set of each family."""
    spec = next(s for name, s in SPECS if name == preset)
    lib = Library(all_units, default_prefix(spec), spec)
    sets = list(vector_sets(spec, 16 * len(families_for(spec)), seed=9))
    for vs in sets:
        if vs.k > 256:
            continue
        np.testing.assert_array_equal(lib.dot(vs), reference.dot(spec, vs))


def test_compiles_strictly_with_every_compiler_here_and_as_cpp(tmp_path):
    """-std=c99 -Wall -Wextra -Werror -pedantic under gcc (and clang where present); the
    headers also compile as C++ (extern "C")."""
    spec = units.get("blackwell-mxf4nvf4").spec_for_formats(None, None)
    export(spec, tmp_path, "u", source="test")
    found = compilers()
    assert "gcc" in found and len(found) >= 2          # make test installs ziglang's clang
    for n, cmd in enumerate(found.values()):
        lib = Library(compile_library(tmp_path, tmp_path / f"cc{n}.so", cc=cmd, opt="-O2"), "u",
                      spec)
        assert check(spec, lib, 500, seed=n).mismatches == 0
    (tmp_path / "use.cpp").write_text('#include "u.h"\nint main() { return u_scales_per_dot(64)'
                                      ' == 4 ? 0 : 1; }\n')
    proc = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                           "-I", str(tmp_path), str(tmp_path / "use.cpp")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert set(STRICT) >= {"-std=c99", "-Wall", "-Wextra", "-Werror"}


def test_a_warning_fails_the_build_in_one_line(tmp_path):
    spec = units.get("hopper-wgmma").spec_for_formats(None, None)
    export(spec, tmp_path, "u", source="test")
    (tmp_path / "extra.c").write_text("int unused_warning(int x) { int y; return x; }\n")
    with pytest.raises(MxsimError, match=r"gcc failed on the export .*unused"):
        compile_library(tmp_path, tmp_path / "lib.so")


def test_the_files_say_where_the_spec_came_from(tmp_path):
    spec = units.get("hopper-wgmma").spec_for_formats(None, None)
    paths = export(spec, tmp_path, source="preset hopper-wgmma")
    names = sorted(p.name for p in paths)
    prefix = default_prefix(spec)
    assert names == sorted(["mxsim_dot.h", "mxsim_dot.c", f"{prefix}.h", f"{prefix}.c",
                            f"{prefix}_dpi.c", f"{prefix}_pkg.sv"])
    head = (tmp_path / f"{prefix}.h").read_text()
    assert spec.digest() in head and "From preset hopper-wgmma" in head
    assert spec.provenance.split()[0] in head
    assert f"#define {prefix.upper()}_K 32" in head
    sv = (tmp_path / f"{prefix}_pkg.sv").read_text()
    assert f'import "DPI-C" pure function int unsigned {prefix}_dpi_instr' in sv
    assert "class scoreboard;" in sv
    assert not list(tmp_path.glob(".*.tmp"))


def test_the_trace_re_derives_its_nodes(tmp_path):
    """An instruction's intermediates: each product's alignment exponent as the formats give
    it (e_zero for a zero), E their largest, the LSB E - F, the aligned terms summing to the
    step's sum, the result that sum rounded, and D as the engine gives it."""
    from fractions import Fraction

    from mxsim import formats
    from mxsim.engine import fast
    from mxsim.vectors import generate
    spec = units.get("blackwell-mxf8f6f4").spec_for_formats("e4m3", "e4m3")
    export(spec, tmp_path, "u", source="test")
    lib = Library(compile_library(tmp_path, tmp_path / "lib.so"), "u", spec)
    vs = generate("normal", a_format="e4m3", m=4, n=4, k=32, scale_format="e8m0", block=32,
                  seed=4)
    want = fast.dot(spec, vs)
    f = formats.get("e4m3")
    for i in range(4):
        for j in range(4):
            a, b = vs.a[i, :], vs.b[:, j]
            t = lib.instruction_trace(a, b, vs.a_scale[i, :], vs.b_scale[:, j],
                                      int(vs.c[i, j]))
            assert t.d == want[i, j]
            st = t.step[0]
            assert (t.n_steps, st.n_terms, st.has_acc, st.aligned_valid) == (1, 32, 1, 1)
            scale_e = int(vs.a_scale[i, 0]) + int(vs.b_scale[0, j]) - 254
            assert t.scale_exp_sum[0] == scale_e
            fa, fb = f.fields(a), f.fields(b)
            for kk in range(32):
                value = float(f.decode(a[kk:kk + 1])[0]) * float(f.decode(b[kk:kk + 1])[0])
                e = spec.e_zero if value == 0 else int(fa.e[kk] + fb.e[kk]) + scale_e
                assert st.term_exp[kk] == e
                assert st.term[kk].value() == Fraction(value) * Fraction(2) ** scale_e
            assert st.max_exp == max(st.term_exp[:33])
            assert st.lsb_exp == st.max_exp - spec.frac_bits
            assert st.sum == sum(st.aligned[:33])
            exact = st.sum * Fraction(2) ** st.lsb_exp
            got = st.result.value()
            assert abs(got) <= abs(exact) < abs(got) + Fraction(2) ** (
                max(exact.numerator.bit_length() - exact.denominator.bit_length(), -126) - 23)
            assert t.to_d.value() == got


def test_a_spec_the_c_engine_cannot_hold_is_refused_in_one_line(tmp_path):
    spec = units.get("hopper-wgmma").spec_for_formats(None, None).replace(k=2048)
    with pytest.raises(MxsimError, match="a fused step of 2048 terms; the C export holds at "
                                         "most 1024"):
        export(spec, tmp_path / "out", source="test")
    assert not (tmp_path / "out").exists()
