"""The cases of the GPU engine's device check (gpu/engine/check.py): what to run, as plain data.

A case is a dict that rebuilds its vector set and unit spec anywhere (:func:`vector_set`,
:func:`unit_spec`): a preset name or a drawn spec (stored whole, as ``spec.to_dict()``), the
formats, the generator family, the shape and the seed. Kinds:

- ``preset``: every preset x every generator family (its operand pairs, scale patterns and C
  formats taken in turn), 16 x 16 dots (``small``: replayed on the CPU in CI);
- ``drawn``: specs drawn by hypothesis with the random-spec strategy of
tests/mxsim/engine/test_engine.py
  (``_specs``; deterministic: ``derandomize``), 16 x 16 dots;
- ``bulk``: a dozen presets on 10.5 million dots each (the dot count);
- ``chain``: long K (4,096 to 65,536) on 16 x 32 dots.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from mxsim import formats, presets, spec, vectors
from mxsim.spec import UnitSpec

__all__ = ["FAMILIES", "FIXTURE", "ROOT", "SIZES", "STAND_IN", "SUMMARY", "all_cases",
           "drawn_specs", "unit_spec", "vector_set"]

ROOT = Path(__file__).resolve().parents[2]
#: The committed device summary (written by the lead after the device run).
SUMMARY = ROOT / "tests" / "data" / "h200" / "2026-12-02-engine" / "engine_check.json"
#: A summary made on the CPU with the fast engine standing in for the GPU (test fixture).
FIXTURE = ROOT / "tests" / "data" / "gpu_engine_fixture" / "engine_check.json"
STAND_IN = "fast (CPU stand-in for the GPU engine: a test fixture, not a device run)"
FAMILIES = vectors.FAMILIES
#: (m, n) of each size class; ``quick`` shrinks every class.
SIZES = {"small": (16, 16), "bulk": (4096, 2560), "chain": (16, 32)}
QUICK_SIZES = {"small": (8, 8), "bulk": (128, 256), "chain": (4, 8)}
#: Presets run on millions of dots, and the long chains (preset, operand formats, scales).
BULK = (("hopper-wgmma", "e4m3", "e4m3", None, None),
        ("hopper-cublas", "e4m3", "e5m2", None, None),
        ("hopper-cublas-fast", "e5m2", "e4m3", None, None),
        ("hopper-mma-sync", "e4m3", "e4m3", None, None),
        ("blackwell-f8f6f4", "e2m1", "e3m2", None, None),
        ("blackwell-mxf8f6f4", "e4m3", "e2m1", "e8m0", 32),
        ("blackwell-mxf4nvf4", "e2m1", "e2m1", "ue4m3", 16),
        ("blackwell-mxf4", "e2m1", "e2m1", "e8m0", 32),
        ("hopper-wgmma-bf16", "bf16", "bf16", None, None),
        ("ampere-mma-tf32", "tf32", "tf32", None, None),
        ("ocp-fp32", "int8", "e4m3", "e8m0", 32),
        ("exact", "e4m3", "e4m3", None, None))
CHAIN_K = (4096, 16384, 65536)
#: The longest chain of each bulk preset (the others: 4,096). A chain is one Python step
#: loop on the GPU (K / k fused steps) and one thread on the CPU: the long ones cost the most.
LONGEST = {"hopper-wgmma": 65536, "hopper-cublas": 65536, "blackwell-mxf4nvf4": 16384,
           "exact": 16384}
_ELEMS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "int8")


def _seed(*parts: Any) -> int:
    return zlib.crc32("/".join(map(str, parts)).encode())


def _k_of(s: UnitSpec, scale: str | None, block: int | None) -> int:
    """One instruction's K for a preset spec (exact: 32; FP32 block scales: 128)."""
    k = s.k or 32
    for step in (block or 1, 128 if scale == "fp32" and block else 1):
        while k % step:
            k += s.k or 32
    return k


def _preset_case(name: str, fi: int, family: str, size: str, quick: bool) -> dict[str, Any]:
    p = presets.get(name)
    a, b = p.pairs[(fi * 7) % len(p.pairs)]
    scale, block = p.scales_for(a, b)[fi % len(p.scales_for(a, b))]
    c_format = p.c_formats[fi % len(p.c_formats)]
    granularity = None
    if scale == "fp32":
        granularity = "block" if block else ("tensor", "row")[fi % 2]
    if family == "nan-scale" and scale is None:
        family = "scale-extremes"
    s = p.spec(a, b, scale_format=scale, block=block, c_format=c_format,
               granularity=granularity)
    m, n = (QUICK_SIZES if quick else SIZES)[size]
    if granularity == "block":
        n = max(n, 128)
    return dict(kind="preset", size=size, unit=name, family=family, a_format=a, b_format=b,
                scale_format=scale, block=block, granularity=granularity, c_format=c_format,
                with_c=p.no_c is None and fi % 4 != 3, m=m, n=n, k=_k_of(s, scale, block) * 2,
                seed=_seed(name, family, size, fi))


def drawn_specs(count: int) -> list[UnitSpec]:
    """``count`` distinct specs drawn by hypothesis (deterministic for one hypothesis
    version; the cases store the specs themselves, so a replay never redraws them)."""
    from hypothesis import HealthCheck, Phase, given, settings
    got: dict[str, UnitSpec] = {}

    @settings(max_examples=count * 4, derandomize=True, database=None,
              phases=[Phase.generate], deadline=None, suppress_health_check=list(HealthCheck))
    @given(_spec_strategy())
    def collect(s: UnitSpec) -> None:
        if len(got) < count:
            got.setdefault(s.digest(), s)

    collect()
    return list(got.values())


def _spec_strategy():
    """tests/mxsim/engine/test_engine.py ``_specs``: the random-spec suite's strategy (the same
    draws)."""
    from hypothesis import strategies as st

    @st.composite
    def specs(draw):
        k = draw(st.sampled_from([16, 32, 64]))
        a_format, b_format = draw(st.sampled_from(_ELEMS)), draw(st.sampled_from(_ELEMS))
        scale = draw(st.sampled_from([None, "e8m0", "ue4m3"]))
        block = None if scale is None else draw(st.sampled_from(
            [b for b in (16, 32) if k % b == 0]))
        group = None
        if scale is not None and draw(st.booleans()):
            group = draw(st.sampled_from([g for g in (4, 8, 16) if block % g == 0]))
            if spec.group_sum_bits(a_format, b_format, group) > spec.MAX_GROUP_BITS:
                group = None
        if group is not None:
            inner = range(group, k, group)
            cuts = sorted(draw(st.sets(st.sampled_from(inner), max_size=3))) if len(inner) \
                else []
            edges = [0, *cuts, k]
            schedule = [list(range(edges[i], edges[i + 1])) for i in range(len(edges) - 1)]
        else:
            perm = draw(st.permutations(range(k)))
            nsteps = draw(st.integers(1, 4))
            cuts = sorted(draw(st.sets(st.integers(1, k - 1), min_size=nsteps - 1,
                                       max_size=nsteps - 1)))
            edges = [0, *cuts, k]
            schedule = [sorted(perm[edges[i]:edges[i + 1]]) for i in range(len(edges) - 1)]
        d_format = draw(st.sampled_from(["fp32", "fp32", "fp16"]))
        upcast = None
        if group is None:
            upcast = draw(st.sampled_from([None, None, "fp16", "bf16", "fp32"]))
            if upcast is not None and not all(spec.widths.holds(formats.get(upcast), f)
                                              for f in (a_format, b_format)):
                upcast = None
        fold = upcast is not None and scale == "e8m0" and draw(st.booleans())
        up_specials = draw(st.sampled_from(["ieee", "finite"])) \
            if upcast in ("bf16", "fp32") else "ieee"
        return UnitSpec(
            name="drawn", a_format=a_format, b_format=b_format, scale_format=scale,
            block=block, k=k, schedule=schedule, group=group,
            frac_bits=draw(st.one_of(st.none(), st.integers(0, 30))),
            align=draw(st.sampled_from(["rz", "rd", "rne", "rz-jam"])),
            product=draw(st.sampled_from(["raw", "normalized"])), upcast=upcast,
            fold_scales=fold, upcast_specials=up_specials,
            c_mode=draw(st.sampled_from(["step", "after"])),
            c_rounding=draw(st.sampled_from(["rne", "rz"])),
            acc_format=draw(st.sampled_from(["fp32", "e8m13", "e8m10", "fp16", "bf16"])),
            acc_rounding=draw(st.sampled_from(["rz", "rne", "ru", "rd"])),
            d_format=d_format, e_zero=draw(st.integers(-200, 5)),
            overflow=draw(st.sampled_from(["inf", "ieee", "saturate"])),
            zero_sign=draw(st.sampled_from(["positive", "ieee"])),
            promote_every=(draw(st.one_of(st.none(), st.integers(1, 3)))
                           if d_format == "fp32" else None),
            promote_rounding=draw(st.sampled_from(["rne", "rz"])))

    return specs()


def _drawn_case(s: UnitSpec, i: int, size: str, quick: bool) -> dict[str, Any]:
    family = FAMILIES[i % len(FAMILIES)]
    if family == "nan-scale" and s.scale_format is None:
        family = "scale-extremes"
    with_c = i % 3 != 2
    m, n = (QUICK_SIZES if quick else SIZES)[size]
    return dict(kind="drawn", size=size, unit="drawn", spec=s.to_dict(), family=family,
                a_format=s.a_format, b_format=s.b_format, scale_format=s.scale_format,
                block=s.block, granularity=None,
                c_format="fp16" if s.d_format == "fp16" and with_c else "fp32",
                with_c=with_c, m=m, n=n, k=s.k * (1 + i % 3), seed=_seed("drawn", i, size))


def _bulk_cases(quick: bool) -> list[dict[str, Any]]:
    out = []
    for i, (name, a, b, scale, block) in enumerate(BULK):
        s = presets.get(name).spec(a, b, scale_format=scale, block=block)
        base = dict(unit=name, a_format=a, b_format=b, scale_format=scale, block=block,
                    granularity=None, c_format="fp32", with_c=True)
        m, n = (QUICK_SIZES if quick else SIZES)["bulk"]
        out.append(dict(kind="bulk", size="bulk", family=("normal", "llm")[i % 2], **base,
                        m=m, n=n, k=_k_of(s, scale, block), seed=_seed("bulk", name)))
        m, n = (QUICK_SIZES if quick else SIZES)["chain"]
        longest = 4096 if quick else LONGEST.get(name, 4096)
        for kk in (k for k in CHAIN_K if k <= longest):
            if quick and name not in LONGEST:
                continue
            out.append(dict(kind="chain", size="chain", family=("llm", "normal")[i % 2],
                            **base, m=m, n=n, k=kk, seed=_seed("chain", name, kk)))
    return out


def all_cases(quick: bool = False, drawn: int = 200) -> list[dict[str, Any]]:
    """Every case of the check, in order (ids are list positions)."""
    cases = []
    for name in presets.names():
        for fi, family in enumerate(FAMILIES):
            cases.append(_preset_case(name, fi, family, "small", quick))
    for i, s in enumerate(drawn_specs(drawn)):
        cases.append(_drawn_case(s, i, "small", quick))
    cases += _bulk_cases(quick)
    for i, c in enumerate(cases):
        c["id"] = i
    return cases


def vector_set(case: dict[str, Any]) -> vectors.VectorSet:
    """The case's vector set, regenerated from its seed."""
    kw = dict(a_format=case["a_format"], b_format=case["b_format"], m=case["m"], n=case["n"],
              k=case["k"], scale_format=case["scale_format"], block=case["block"],
              with_c=case["with_c"], c_format=case["c_format"], seed=case["seed"],
              allow_large=True)
    if case["granularity"]:
        kw["scale_granularity"] = case["granularity"]
    return vectors.generate(case["family"], **kw)


def unit_spec(case: dict[str, Any], vs: vectors.VectorSet) -> UnitSpec:
    """The case's spec: the preset's for the set's formats, or the drawn spec stored."""
    if case["unit"] == "drawn":
        return spec.from_dict(case["spec"])
    return presets.get(case["unit"]).spec_for(vs)
