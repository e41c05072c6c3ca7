"""``mxsim prove --unit``: the generated unit (or a mutant of it) proven against the reference
circuit of its spec, by bounded model checking through SymbiYosys.

A proof is a list of :class:`Proof` rows, one per check of a harness (:mod:`hdl.formal`):

``whole``
    :class:`hdl.formal.miter.SingleBeat`, every check at once: the monolithic miter. Its
    bounded check to ``latency + 1`` cycles covers a beat's whole life, so a pass is a proof of
    the datapath for every input; it closes in time only for small units.
``compositional``
    the checks of :mod:`hdl.formal.obligations` (``terms``, ``sum``, ``post``), each proven on
    its own (one conversion per obligation, ``sel`` picks the check): the composition is
    stated there.
``handshake``
    :class:`hdl.formal.miter.Stream` (values checked too where ``data``), to a depth of a few
    blocks, or by k-induction (``induction``), which may not close.

A failing check of a harness whose beat is real (``whole``, ``terms``) gives its
counterexample as an ``mxsim.vectors/1`` set (``counterexample.npz``) beside the trace; a cut
(``sum``, ``post``) has no inputs to give, so its failure is a finding about that stage, and
:func:`prove_mutant` runs the whole miter first, for a real one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from mxsim import vectors
from mxsim.microarch import MicroArch
from mxsim.spec import UnitSpec

from .sby import ProofResult, read_trace, run_sby, run_yosys

__all__ = ["Proof", "prove_unit", "prove_mutant", "beats_to_vectors", "METHODS"]

METHODS = ("compositional", "whole")


@dataclass(frozen=True)
class Proof:
    """One check proven (or not): its harness, name, how, and what came of it."""
    harness: str
    check: str
    method: str          # "bmc" or "k-induction"
    depth: int
    solver: str
    status: str          # PASS, FAIL, UNKNOWN, TIMEOUT, ERROR
    seconds: float
    message: str
    counterexample: str | None = None
    trace: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _harnesses(spec: UnitSpec, ua: MicroArch, unit_cls: type, method: str | None,
               handshake: bool, data: bool, only: tuple[str, ...] | None = None
               ) -> list[tuple[str, object, int, bool]]:
    """(name, harness, depth, one proof per check) of each harness the proof runs."""
    from hdl.formal.miter import SingleBeat, Stream
    from hdl.formal.obligations import OBLIGATIONS
    lat = ua.latency(spec)
    out = []
    if method is None:
        pass
    elif method == "whole":
        out.append(("whole", SingleBeat(unit_cls(spec, ua), lat), lat + 1, False))
    else:
        for name, cls in OBLIGATIONS.items():
            if only is None or name in only:
                harness = cls(unit_cls, spec, ua)
                out.append((name, harness, harness.depth, True))
    if handshake:
        depth = ua.stages + 3
        out.append(("handshake", Stream(unit_cls(spec, ua), lat, depth, data=data),
                    2 * lat + ua.passes(spec) + 4, False))
    return out


def prove_unit(spec: UnitSpec, ua: MicroArch, *, unit_cls: type | None = None,
               method: str | None = "compositional", handshake: bool = True, data: bool = False,
               induction: bool = False, solver: str = "yices", timeout: float = 600,
               jobs: int = 2, out_dir: Path | str = "mxsim-prove",
               progress=None, obligations: tuple[str, ...] | None = None) -> list[Proof]:
    """Prove ``unit_cls`` (default: the generated ``DotProductUnit``) of ``spec`` built as
    ``ua`` against the reference circuit; a row per check (see the module docstring).
    ``method`` None: the handshake alone; ``obligations``: only these of a compositional
    proof."""
    from amaranth.back import rtlil

    from hdl.unit import DotProductUnit
    if method is not None and method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    unit_cls = unit_cls or DotProductUnit
    out_dir = Path(out_dir)
    tasks = []
    for name, harness, depth, split in _harnesses(spec, ua, unit_cls, method, handshake,
                                                  data, obligations):
        text = rtlil.convert(harness, name="top", ports=harness.ports)
        if split:       # flattened once; each job keeps its own check's cone alone
            text = run_yosys({"top.il": text}, _FLATTEN, workdir=out_dir / name,
                             output="flat.il")
        checks = list(enumerate(harness.checks, 1)) if split else [(0, "every check")]
        mode = "prove" if induction and name == "handshake" else "bmc"
        tasks += [(name, sel, check, text, depth, mode, split) for sel, check in checks]

    def run(task) -> Proof:
        name, sel, check, text, depth, mode, split = task
        work = out_dir / name / (f"check{sel:03d}" if sel else "all")
        res = run_sby({"top.il": text}, _script(sel, alone=split), workdir=work, mode=mode,
                      depth=depth, solver=solver, timeout=timeout)
        proof = _row(name, check, res, spec, work)
        if progress is not None:
            progress(proof)
        return proof

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(run, tasks))


# A harness flattened (and its processes lowered) once for all of its checks' jobs.
_FLATTEN = "read_rtlil top.il\nhierarchy -top top\nproc\nflatten\nhierarchy -top top\n" \
           "write_rtlil flat.il"


def _script(sel: int, alone: bool = False) -> str:
    """sby's script for check ``sel`` (0: every check) of ``top.il``; ``alone`` (a flattened
    harness): the other checks' assertions deleted (the assumptions kept), so that only
    this one's cone is left."""
    from hdl.formal.miter import CHECK_MESSAGE
    keep = CHECK_MESSAGE.format(n=sel, name="*").replace(" ", "?")
    drop = f"delete t:$check r:FLAVOR=assert %i r:FORMAT={keep} %d\n" if alone else ""
    return (f"read_rtlil top.il\nhierarchy -top top\nproc\ncd top\n"
            f"connect -set sel 16'd{sel}\ncd ..\n{drop}prep -top top")


def _row(name: str, check: str, res: ProofResult, spec: UnitSpec, work: Path) -> Proof:
    cex = None
    if res.status == "FAIL" and res.trace is not None and name in ("whole", "terms"):
        vs = beats_to_vectors(spec, [read_trace(res.trace, ["top.beat"])[0]["top.beat"]])
        cex = work / "counterexample.npz"
        vectors.save(vs, cex)
    method = "k-induction" if res.mode == "prove" else "bmc"
    return Proof(harness=name, check=check, method=method, depth=res.depth,
                 solver=res.solver, status=res.status, seconds=round(res.seconds, 1),
                 message=res.message, counterexample=str(cex) if cex else None,
                 trace=str(res.trace) if res.trace else None)


def beats_to_vectors(spec: UnitSpec, beats: list[int]) -> vectors.VectorSet:
    """Input beats (``block_layout(spec)`` bit patterns, ``first`` = ``last`` = 1) as a vector
    set of one-block dot products, batch index = beat."""
    from amaranth.lib import data

    from hdl.stages import block_layout
    layout, k = block_layout(spec), spec.k
    views = [data.Const(layout, int(b)) for b in beats]
    n = len(views)
    a = np.array([[[int(v.a[i]) for i in range(k)]] for v in views], np.uint8)
    b = np.array([[[int(v.b[i])] for i in range(k)] for v in views], np.uint8)
    c = np.array([[[int(v.c)]] for v in views], np.uint32)
    kw = {}
    if spec.scale_format is not None:
        blocks = k // spec.block

        def scales(v, field: str) -> list[int]:
            f = getattr(v, field)
            return [int(f)] if blocks == 1 else [int(f[j]) for j in range(blocks)]
        kw = dict(a_scale=np.array([scales(v, "a_scale") for v in views],
                                   np.uint8).reshape(n, 1, blocks),
                  b_scale=np.array([scales(v, "b_scale") for v in views],
                                   np.uint8).reshape(n, blocks, 1),
                  scale_format=spec.scale_format, block=spec.block)
    return vectors.VectorSet(a=a, b=b, a_format=spec.a_format, b_format=spec.b_format, c=c,
                             producer="mxsim prove (counterexample)", **kw)


def prove_mutant(spec: UnitSpec, ua: MicroArch, fault: str, *, solver: str = "yices",
                 timeout: float = 600, out_dir: Path | str = "mxsim-prove",
                 equivalence: float | None = None, jobs: int = 1) -> dict:
    """Mutant ``fault`` (:mod:`testbenches.unit.faults`) against the reference circuit: the
    whole miter; where that did not fail, the quick obligations (``sum``, ``post``,
    ``chain``); where none failed, the stream miter (without values, then with). Killed
    where one fails; a kill by the whole miter carries its counterexample (a cut's failure
    has no inputs to give).

    ``equivalence`` (seconds per check): a survivor is then proven like the unit (every
    obligation of the compositional proof and the handshake, on the mutant, ``jobs`` checks
    at a time): where every check passes, the mutant is *equivalent* to the spec on this
    unit (``equivalent`` True); where one fails, killed by it; else ``equivalent`` False
    (neither shown)."""
    from ..unit.faults import FAULTS, GROUP_FAULTS, unit_class
    cls, out_dir = unit_class(fault), Path(out_dir)
    whole = prove_unit(spec, ua, unit_cls=cls, method="whole", handshake=False,
                       solver=solver, timeout=timeout, jobs=1, out_dir=out_dir / fault)[0]
    cut = stream = None
    if whole.status != "FAIL":          # the quick cuts: the tree, rounding and chaining
        cut = next((r for r in prove_unit(spec, ua, unit_cls=cls, handshake=False,
                                          obligations=("sum", "post", "chain"), solver=solver,
                                          timeout=timeout, jobs=1, out_dir=out_dir / fault)
                    if r.status == "FAIL"), None)
    for data in (False, True):          # the handshake alone is quick; then with values
        if whole.status != "FAIL" and cut is None and (stream is None
                                                       or stream.status != "FAIL"):
            stream = prove_unit(spec, ua, unit_cls=cls, method=None, handshake=True,
                                data=data, solver=solver, timeout=timeout, jobs=1,
                                out_dir=out_dir / fault / f"stream{'_values' * data}")[0]
    killed_by = "whole" if whole.status == "FAIL" else (
        cut.harness if cut is not None else
        "handshake" if stream is not None and stream.status == "FAIL" else None)
    equiv = None
    if equivalence and killed_by is None:
        equiv = prove_unit(spec, ua, unit_cls=cls, solver=solver, timeout=equivalence,
                           jobs=jobs,
                           out_dir=out_dir / fault / "equivalence")
        cut = next((r for r in equiv if r.status == "FAIL"), None)
        killed_by = cut.harness if cut is not None else None
    return {"fault": fault, "where": FAULTS.get(fault) or GROUP_FAULTS[fault],
            "killed_by": killed_by,
            "equivalent": None if equiv is None else all(r.status == "PASS" for r in equiv),
            "equivalence_checks": None if equiv is None else len(equiv),
            "equivalence_s": None if equiv is None else round(sum(r.seconds for r in equiv), 1),
            "whole": whole.status, "whole_s": whole.seconds,
            "handshake": stream.status if stream else None,
            "handshake_s": stream.seconds if stream else None,
            "counterexample": whole.counterexample,
            "cut": f"{cut.harness}: {cut.check}" if cut is not None else None,
            "trace": whole.trace if whole.status == "FAIL" else (
                cut.trace if cut is not None else stream.trace if stream else None)}
