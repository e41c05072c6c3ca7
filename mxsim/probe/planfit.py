"""Plans from data: the GEMM plan (:mod:`mxsim.plans`) that reproduces a library's outputs.

:func:`fit_plan` searches, for one result file, over the units that take its formats, the
ways to cut K (split count x granule, cuBLASLt's rule), and the reductions (partials and
running sum in FP32, BF16 or FP16; forward, pairwise or serial merge); the epilogue writes the
file's D format. Candidates are screened on a sample of the outputs (every chunk of a
candidate computed in one batched engine call), then checked on every output by
:func:`mxsim.plans.run.run`. A result no plan explains is reported with the nearest plans and,
where it is so, the K range whose omission would explain it (a library that dropped a tail).

:func:`order_probe` writes inputs whose outputs expose the summation tree (FPRev's idea, with
tensor-core chunks as leaves): a large product at K = 0 cancelled by its negation at K = p
under a sea of small ones shows, as p moves, which ones were added after the two met; a
large and a small product g apart show whether one chain or an FP32 add joined them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats, presets, vectors
from ..engine import fast
from ..errors import UnitError
from ..plans import Merge, Plan, PlanError, chunk_bounds
from ..plans.run import as_fp32, chunk_set, reduce_fast, run
from ..spec import UnitSpec
from ..vectors import VectorSet

__all__ = ["PlanFit", "fit_plan", "order_probe", "candidate_units", "GRANULES", "MAX_SPLIT"]

#: Granules (G) tried, besides the unit's own k.
GRANULES = (8, 16, 32, 64, 128, 256)
#: The largest split count tried.
MAX_SPLIT = 64
#: The granule cuBLASLt uses by operand width (REFERENCE.md, "Library GEMMs"; TF32: the
#: K tile of the s1688 kernels our H200 ran): tried first.
_LIBRARY_G = {8: 128, 16: 64, 19: 16}

_IGNORED = ("name", "instruction", "provenance")


def candidate_units(vs: VectorSet, arch: str | None = None) -> list[tuple[str, UnitSpec]]:
    """Presets that take ``vs``'s formats, one per distinct arithmetic (the first name of
    each), those of ``arch`` (e.g. "hopper") first."""
    seen: dict[str, tuple[str, UnitSpec]] = {}
    names = presets.names()
    if arch:
        names = sorted(names, key=lambda n: not n.startswith(arch))
    for name in names:
        try:
            spec = presets.get(name).spec_for(vs)
        except (UnitError, ValueError):
            continue
        key = repr(sorted((k, v) for k, v in spec.to_dict().items() if k not in _IGNORED))
        seen.setdefault(key, (name, spec))
    return list(seen.values())


def _arch(vs: VectorSet) -> str | None:
    cap = str(vs.extra.get("device", {}).get("capability", "")) if isinstance(
        vs.extra.get("device"), dict) else ""
    return {"9": "hopper", "8": "ampere", "10": "blackwell", "12": "rtx-blackwell"}.get(
        cap.split(".")[0]) if cap else None


@dataclass
class PlanFit:
    """What :func:`fit_plan` found."""
    plan: Plan | None                    #: the simplest plan exact on every output, or None
    equal: int                           #: outputs it (or the nearest plan) reproduces
    total: int
    alternatives: list[Plan] = field(default_factory=list)   #: others exact on every output
    sample_only: int = 0                 #: more candidates exact on the sample, not checked
    near: list[tuple[Plan, int]] = field(default_factory=list)   #: nearest, when none exact
    missing: str | None = None           #: what is missing, when no plan explains the outputs
    tried: int = 0                       #: candidates screened
    units: list[str] = field(default_factory=list)     #: units searched
    skipped: list[str] = field(default_factory=list)   #: units not searched (one was exact)

    @property
    def exact(self) -> bool:
        return self.plan is not None

    def report(self) -> str:
        lines = [f"{self.tried} candidate plans screened over unit(s) {', '.join(self.units)}"
                 + (f" (not searched, one before was exact: {', '.join(self.skipped)})"
                    if self.skipped else "")]
        if self.plan is not None:
            lines.append(f"plan: {self.plan.describe()}: {self.equal:,} of {self.total:,} "
                         f"outputs equal")
            for alt in self.alternatives:
                lines.append(f"  also exact: {alt.describe()}")
            if self.sample_only:
                lines.append(f"  and {self.sample_only} more exact on the sample (not checked "
                             f"on every output)")
        else:
            lines.append("no plan in the search space reproduces every output")
            for plan, equal in self.near:
                lines.append(f"  nearest: {plan.describe()}: {equal:,} of {self.total:,}")
            if self.missing:
                lines.append(f"  {self.missing}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"exact": self.exact, "equal": self.equal, "total": self.total,
                "plan": None if self.plan is None else self.plan.to_dict(),
                "alternatives": [p.to_dict() for p in self.alternatives],
                "sample_only": self.sample_only, "tried": self.tried,
                "near": [{"plan": p.to_dict(), "equal": e} for p, e in self.near],
                "missing": self.missing, "units": self.units, "skipped": self.skipped}


def _granules(spec: UnitSpec, vs: VectorSet) -> list[int]:
    k = spec.k or 1
    width = formats.get(vs.a_format).bits
    first = _LIBRARY_G.get(width)
    out = [g for g in (k,) + GRANULES if g >= k and g % k == 0 and g <= vs.k
           and (vs.block is None or g % vs.block == 0)]
    out = sorted(set(out), key=lambda g: (g != first, g))
    return out or [k]


def _sample(vs: VectorSet, limit: int) -> VectorSet:
    """About ``limit`` outputs spread over the set (every r-th row and column); the whole
    set when it is small (2^22 products or fewer)."""
    if vs.num_dots * vs.k <= 1 << 22:
        return vs
    per = max(1, int(np.sqrt(limit / max(1, int(np.prod(vs.batch_shape))))))
    rs, cs = max(1, vs.m // per), max(1, vs.n // per)
    return vs.subset(slice(0, None, rs), slice(0, None, cs))


def _batched_partials(spec: UnitSpec, vs: VectorSet, bounds: list[tuple[int, int]]
                      ) -> list[npt.NDArray[np.uint32]]:
    """Every chunk's partial in one engine call: the chunks stacked on a new batch axis, each
    zero-padded at its end to the unit's k and then at its start to the longest (a chain from
    +0 through zero steps stays +0)."""
    k = spec.k or 1
    pads = [-(-(k1 - k0) // k) * k for k0, k1 in bounds]
    longest = max(pads)
    parts = [chunk_set(vs, k0, k1, kp) for (k0, k1), kp in zip(bounds, pads, strict=True)]
    a = np.stack([np.concatenate([np.zeros(p.a.shape[:-1] + (longest - p.k,), p.a.dtype),
                                  p.a], axis=-1) for p in parts])
    b = np.stack([np.concatenate([np.zeros(p.b.shape[:-2] + (longest - p.k,) +
                                           p.b.shape[-1:], p.b.dtype), p.b], axis=-2)
                  for p in parts])
    stacked = vs.replace(a=a, b=b, c=None, d=None)
    d = fast.dot(spec, stacked)
    return [np.asarray(d[i], np.uint32) if spec.d_format == "fp32" else
            as_fp32(d[i], spec.d_format) for i in range(len(bounds))]


def _reductions(out_format: str, chunks: int) -> list[dict[str, Any]]:
    """Reduction variants, simplest first (for ``chunks`` > 1)."""
    narrow = [f for f in ("bf16", "fp16") if f == out_format]
    out = [dict(partial_format="fp32", merge=Merge.FORWARD, sum_format="fp32")]
    for p in narrow:
        out.append(dict(partial_format=p, merge=Merge.FORWARD, sum_format="fp32"))
    if chunks > 3:                       # with three, pairwise is forward
        out.append(dict(partial_format="fp32", merge=Merge.TREE, sum_format="fp32"))
        for p in narrow:
            out.append(dict(partial_format=p, merge=Merge.TREE, sum_format="fp32"))
    for s in narrow:
        out.append(dict(partial_format=s, merge=Merge.FORWARD, sum_format=s))
    return out


def fit_plan(vs: VectorSet, *, units: list[str] | None = None, max_split: int = MAX_SPLIT,
             sample: int = 64, verify: int = 4, call: str | None = None,
             exhaustive: bool = False) -> PlanFit:
    """The simplest plan that reproduces every output of ``vs`` (which holds ``d``).

    Units are searched in turn (those of the GPU that wrote the file first); the search stops
    after the first unit with an exact plan unless ``exhaustive``. Up to ``verify`` plans
    exact on the sample are checked on every output."""
    if vs.d is None:
        raise PlanError("the set holds no results (d) to fit a plan to; give the file the "
                        "GPU wrote (mxsim gpu run)")
    if vs.scale_format == "fp32" or vs.tensor_scale is not None:
        raise PlanError("fitting plans to sets with FP32 scales is not supported yet (the "
                        "library applies them to the reduced sum)")
    out_format = vs.d_format
    if units is None:
        cands = candidate_units(vs, _arch(vs))
    else:
        cands = []
        for name in units:
            try:
                cands.append((name, presets.get(name).spec_for(vs)))
            except (UnitError, ValueError) as exc:
                raise PlanError(f"unit {name!r} cannot run this set: {exc}") from None
    if not cands:
        raise PlanError(f"no preset takes {vs.a_format} x {vs.b_format}; fit a unit first")
    small = _sample(vs, sample)
    want = np.asarray(small.d).astype(np.uint32) if out_format == "fp32" else np.asarray(
        small.d)
    c = None if small.c is None else (np.asarray(small.c, np.uint32) if small.c_format ==
                                      "fp32" else as_fp32(small.c, small.c_format))
    base = dict(call=call or str(vs.extra.get("call") or vs.producer), out_format=out_format)
    hits: list[Plan] = []
    scores: list[tuple[int, Plan]] = []
    exact: list[Plan] = []
    tried, searched = 0, []
    full = np.asarray(vs.d)
    checked: dict[str, bool] = {}

    def accept(plan: Plan) -> bool:
        """Exact on every output; True stops the screen (not exhaustive: the first will do)."""
        key = plan.digest()
        if key not in checked:
            checked[key] = small is vs or np.array_equal(np.asarray(run(plan, vs)), full)
            if checked[key]:
                exact.append(plan)
            else:
                scores.append((int(full.size) - 1, plan))      # exact on the sample only
        return checked[key] and (not exhaustive or len(exact) >= verify)

    for name, spec in cands:
        if exact and not exhaustive:
            break
        searched.append(name)
        _, unit_tried = _screen_unit(name, spec, vs, small, want, c, base, max_split, scores,
                                     accept)
        tried += unit_tried
        if exhaustive and len(exact) >= verify:
            break
    skipped = [n for n, _ in cands if n not in searched]
    if exact:
        return PlanFit(plan=exact[0], equal=full.size, total=full.size,
                       alternatives=exact[1:], sample_only=len(hits), tried=tried,
                       units=searched, skipped=skipped)
    scores.sort(key=lambda t: -t[0])
    near = [(p, int((np.asarray(run(p, vs)) == full).sum())) for _, p in scores[:3]]
    near.sort(key=lambda t: -t[1])
    return PlanFit(plan=None, equal=near[0][1] if near else 0, total=full.size,
                   near=near, missing=_dropped_tail(vs, small, want, cands, max_split),
                   tried=tried, units=searched, skipped=skipped)


def _chunkings(spec: UnitSpec, vs: VectorSet, max_split: int
               ) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """Every distinct way (split, granule, bounds) to cut K, fewest chunks first (the
    library's granule first among equals)."""
    seen: dict[tuple, tuple[int, int, list[tuple[int, int]]]] = {}
    for rank, g in enumerate(_granules(spec, vs)):
        for s in range(1, max_split + 1):
            bounds = chunk_bounds(vs.k, s, g)
            if s > 1 and len(bounds) == 1:
                continue
            seen.setdefault(tuple(bounds), (s, g, bounds, rank))
    order = sorted(seen.values(), key=lambda t: (len(t[2]), t[3]))
    return [(s, g, b) for s, g, b, _ in order]


def _screen_unit(name: str, spec: UnitSpec, vs: VectorSet, small: VectorSet, want, c, base,
                 max_split: int, scores: list, accept) -> tuple[list[Plan], int]:
    """The chunkings and reductions of unit ``name`` on the sample, simplest first: the plans
    exact there, and how many were tried (the others go to ``scores``). ``accept(plan)``
    checks a plan on every output; the screen stops at the first it accepts."""
    hits: list[Plan] = []
    tried = 0
    out_format = base["out_format"]
    for s, g, bounds in _chunkings(spec, vs, max_split):
        plan0 = Plan(unit=name, split=s, granule=g if s > 1 else None, **base)
        try:
            parts = _batched_partials(spec, small, bounds) if vs.scale_format is None \
                else _direct(plan0, small)
        except (PlanError, UnitError):
            continue
        plans = [plan0.replace(**v) for v in
                 ([{}] if len(bounds) == 1 else _reductions(out_format, len(bounds)))]
        serial = out_format in ("bf16", "fp16") and len(bounds) > 1
        if serial:
            plans.append(plan0.replace(merge=Merge.SERIAL, sum_format=out_format))
        for plan in plans:
            tried += 1
            got = run(plan, small) if plan.merge is Merge.SERIAL else reduce_fast(
                parts, plan, c, None)
            eq = int((np.asarray(got) == want).sum())
            if eq != want.size:
                scores.append((eq, plan))
                continue
            hits.append(plan)
            if accept(plan):
                return hits, tried
    return hits, tried


def _direct(plan: Plan, vs: VectorSet) -> list[npt.NDArray[np.uint32]]:
    from ..plans.run import partials
    return partials(plan, vs)


def _dropped_tail(vs: VectorSet, small: VectorSet, want, units: list[tuple[str, UnitSpec]],
                  max_split: int) -> str | None:
    """If a plan that skips its last chunk explains every output, say which K it lost (a
    library that dropped the tail: cuBLASLt's split-K bug on some shapes)."""
    if vs.scale_format is not None:
        return None
    full = np.asarray(vs.d)
    for name, spec in units[:2]:
        seen: set[int] = set()
        for g in _granules(spec, vs):
            for split in range(2, max_split + 1):
                bounds = chunk_bounds(vs.k, split, g)
                k0 = bounds[-1][0]
                if len(bounds) < 2 or k0 in seen:
                    continue
                seen.add(k0)
                kept = bounds[:-1]
                parts = _batched_partials(spec, small, kept)
                plan = Plan(unit=name, split=len(kept), granule=kept[0][1],
                            out_format=vs.d_format)
                if not np.array_equal(np.asarray(reduce_fast(parts, plan, None, None)), want):
                    continue
                cut = vs.replace(a=vs.a[..., :k0], b=vs.b[..., :k0, :], c=None, d=None)
                if np.array_equal(np.asarray(run(plan, cut)), full):
                    return (f"every output equals {name} split-K {split} (G = {g}) without "
                            f"K range [{k0}, {vs.k}): the library dropped that tail")
    return None


# -- the order probe ------------------------------------------------------------------------

def _pow2_range(fmt: formats.Format) -> tuple[int, int]:
    """Exponents of the largest and the smallest positive powers of two of ``fmt``."""
    low = fmt.min_subnormal if fmt.subnormals else fmt.min_normal
    return int(np.floor(np.log2(fmt.max))), int(np.ceil(np.log2(low)))


def _code(fmt: formats.Format, value: float) -> int:
    return int(fmt.encode(np.array([value]))[0])


def order_probe(a_format: str, b_format: str | None = None, *, k: int, seed: int = 0,
                step: int = 8, random_rows: int = 16, cols: int = 2) -> VectorSet:
    """Inputs whose outputs expose how a GEMM cut and summed K (no C).

    Rows of A, each against a column of ones in B (column 0; the other ``cols - 1`` columns
    are random ``llm`` values):

    - *staircase* rows, one per p on a grid of ``step``: the largest power of two at K = 0,
      its negation at K = p, and small powers of two (spread so that the large one swamps
      them all in FP32) elsewhere. The output counts the small ones added after the pair met:
      constant while p stays in one chunk, a step at every chunk boundary;
    - *pair* rows, one per j: a large product at K = j and one 2^-16 of it at K = j + step;
      a unit's chain drops the small one where an FP32 add between chunks keeps it;
    - *merge* rows: the large product at one end and products 2^-23..2^-25 of it every
      ``step`` or ``4 * step``: where each chunk's small ones meet the large one (forward,
      pairwise) decides how many are lost;
    - ``random_rows`` rows of ``llm`` values, for the rounding of partials and sums.
    """
    b_format = b_format or a_format
    fa, fb = formats.get(a_format), formats.get(b_format)
    if isinstance(k, bool) or not isinstance(k, int) or k < step or k % step:
        raise PlanError(f"K ({k}) must be a positive multiple of the probe step ({step})")
    rows_total = 2 * (k // step) + 12 + random_rows
    size = rows_total * k * fa.code_dtype.itemsize + k * cols * 4
    if size > vectors.LARGE_BYTES:
        raise PlanError(f"a plan probe of K = {k} would hold {size:,} bytes, above the limit of "
                        f"{vectors.LARGE_BYTES:,}; probe a K of at most 16384, or a larger step")
    e_hi, e_lo = _pow2_range(fa)
    grid = list(range(step, k, step))
    # small ones: as many as the range allows to be swamped in FP32 (24 bits + count)
    room = e_hi - e_lo - 26
    count = max(1, min(k - 2, 1 << max(0, room)))
    stride = max(1, -(-k // count))
    small_e = max(e_lo, e_hi - 26 - int(np.ceil(np.log2(max(2, -(-k // stride))))))
    big, small = _code(fa, 2.0 ** e_hi), _code(fa, 2.0 ** small_e)
    neg_big = _code(fa, -(2.0 ** e_hi))
    rows = []
    for p in grid:
        row = np.zeros(k, fa.code_dtype)
        row[stride // 2::stride] = small
        row[0], row[p] = big, neg_big
        rows.append(row)
    pair_e = max(e_lo, e_hi - 16)
    for j in range(0, k - step, step):
        row = np.zeros(k, fa.code_dtype)
        row[j], row[j + step] = big, _code(fa, 2.0 ** pair_e)
        rows.append(row)
    for shift in (23, 24, 25):              # merge rows: one large, then small ones
        for stride_m in (step, 4 * step):
            row = np.zeros(k, fa.code_dtype)
            row[::stride_m] = _code(fa, 2.0 ** max(e_lo, e_hi - shift))
            row[0] = big
            rows.append(row)
            rows.append(row[::-1].copy())
    rnd = vectors.generate("llm", a_format=a_format, b_format=b_format, m=random_rows,
                           n=cols, k=k, seed=seed, with_c=False)
    a = np.concatenate([np.stack(rows), rnd.a], axis=0)
    b = rnd.b.copy()
    b[:, 0] = _code(fb, 1.0)
    return VectorSet(a=a, b=b, a_format=a_format, b_format=b_format, producer="mxsim probe plan",
                     extra={"probe": "plan-order", "step": step, "seed": int(seed)})


# -- the recovery study: plans drawn at random, run through the model, fitted back ----------

STUDY_FORMATS = ("bf16", "fp16", "tf32", "e4m3", "e5m2")
STUDY_K = (256, 512, 1024, 1536, 2048)


def draw_plan(rng: np.random.Generator) -> tuple[str, int, Plan]:
    """A random (operand format, K, plan) over Hopper's units, as the recovery study draws."""
    fmt = str(rng.choice(STUDY_FORMATS))
    k = int(rng.choice(STUDY_K))
    probe = vectors.generate("llm", a_format=fmt, m=2, n=2, k=k, with_c=False)
    units = [n for n, _ in candidate_units(probe, "hopper") if n.startswith("hopper")]
    unit = str(rng.choice(units))
    out = str(rng.choice(["fp32", fmt])) if fmt in ("bf16", "fp16") else "fp32"
    split = int(rng.integers(1, 13))
    g = _LIBRARY_G[formats.get(fmt).bits]
    chunks = len(chunk_bounds(k, split, g))
    variant: dict[str, Any] = {}
    if chunks > 1:
        options = _reductions(out, chunks)
        variant = dict(options[int(rng.integers(len(options)))])
        if out != "fp32" and rng.random() < 0.2:
            variant = dict(merge=Merge.SERIAL, sum_format=out)
    return fmt, k, Plan(unit=unit, split=split, granule=g if split > 1 else None,
                        out_format=out, **variant)


def same_plan(x: Plan, y: Plan, vs: VectorSet) -> bool:
    """The same arithmetic: units computing alike on ``vs``'s formats, the same chunks, the
    same reduction and epilogue (split counts that cut K alike are the same plan)."""
    def key(p: Plan):
        spec = presets.get(p.unit).spec_for(vs)
        bounds = p.bounds(vs.k, spec.k)
        red = (p.partial_format, p.merge, p.sum_format) if len(bounds) > 1 else ()
        if len(bounds) == 3 and p.merge is Merge.TREE:
            red = (p.partial_format, Merge.FORWARD, p.sum_format)
        arith = sorted((k, v) for k, v in spec.to_dict().items() if k not in _IGNORED)
        return repr(arith), tuple(bounds), red, p.alpha, p.beta, p.out_format
    return key(x) == key(y)


#: The study's split range: draws take 1..12, the fit searches up to this.
STUDY_MAX_SPLIT = 16


def recovery_trial(index: int, seed: int) -> dict[str, Any]:
    """Trial ``index`` of the study seeded ``seed``: draw, probe, fit (splits up to
    :data:`STUDY_MAX_SPLIT`), check on fresh inputs (an ``llm`` set seeded apart from the
    probe)."""
    rng = np.random.default_rng([seed, index])
    fmt, k, plan = draw_plan(rng)
    probe = order_probe(fmt, k=k, seed=index)
    observed = probe.with_result(run(plan, probe), d_format=plan.out_format,
                                 producer="mxsim plan model")
    fit = fit_plan(observed, max_split=STUDY_MAX_SPLIT)
    fresh = vectors.generate("llm", a_format=fmt, m=16, n=16, k=k, seed=10_000 + index,
                             with_c=False)
    equal = fit.plan is not None and np.array_equal(run(fit.plan, fresh), run(plan, fresh))
    return {"trial": index, "format": fmt, "k": k, "drawn": plan.to_dict(),
            "fitted": None if fit.plan is None else fit.plan.to_dict(),
            "identical": fit.plan is not None and same_plan(fit.plan, plan, fresh),
            "fresh_equal": bool(equal), "tried": fit.tried}


def study(trials: int = 20, seed: int = 2026) -> dict[str, Any]:
    """The recovery study: ``trials`` plans drawn, probed, fitted (the record
    tests/data/plan_recovery_20.json holds)."""
    return {"command": f"python -m mxsim.probe.planfit --trials {trials} --seed {seed} -o OUT",
            "seed": seed, "max_split": STUDY_MAX_SPLIT,
            "trials": [recovery_trial(i, seed) for i in range(trials)]}


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m mxsim.probe.planfit",
                                 description="the plan recovery study: plans drawn at random, "
                                             "run through the model, fitted back")
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    rec = study(args.trials, args.seed)
    with open(args.output, "w") as fh:
        fh.write(json.dumps(rec, indent=1) + "\n")
    t = rec["trials"]
    print(f"{sum(r['fresh_equal'] for r in t)} of {len(t)} equal on fresh inputs, "
          f"{sum(r['identical'] for r in t)} the same plan; wrote {args.output}")
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main())
