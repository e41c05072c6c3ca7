"""``prove_array``: the handshake contract of an array of units (``hdl.array``), or of a
mutant of it, proven by bounded model checking through SymbiYosys.

The harness is :class:`hdl.formal.array.ArrayStream`: free waves in every cycle, the
array's output timed, ordered and labelled against the waves taken, each wave taken exactly
when the units, the fetch counters and its slot allow it, and with ``data`` each unit's beat
(blocks, scales, C chained through the accumulators) and D where the contract puts them. It
is converted once; each check is proven as its own job (``sel``), to ``depth`` cycles from
reset (default :func:`hdl.formal.array.array_depth`) or by k-induction. A row per check, as
:func:`testbenches.formal.prove.prove_unit` gives.

Each unit's D is cut free before the check (Yosys ``cutpoint`` on its pack stage: any value
in any cycle), so the checks hold whatever the units compute and the solver never sees their
arithmetic; the unit's own proof (``mxsim prove``) covers that. The unit's control (its
``i.ready``, ``o.valid``) stays in.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mxsim.array import ArraySpec

from .prove import Proof
from .sby import ProofResult, run_sby

__all__ = ["prove_array", "small_array", "HARNESS"]

#: The harness name in the rows of :func:`prove_array`.
HARNESS = "array"
# Each unit's last datapath stage (hdl.stages' PostPipeline's pack): the D it makes.
_PACK = "top.dut.unit_*.post.pack"


def small_array(lanes: int = 1, **changes) -> ArraySpec:
    """The array the proofs in CI and docs/formal.md use: 2 x 2 E5M2 units of k = 2 (P = 2
    with one lane, ``L = 4``), interleave 2 (below ``(L + 1) / P``: chained waves wait), A at
    2 and B at 3 bytes per cycle (a full wave needs 4 of each), so ``i.ready`` drops for the
    units, each operand buffer and the chain. ``changes``: other ArraySpec fields."""
    from mxsim.array import Buffer
    from mxsim.design import resolve_design
    spec, ua = resolve_design("hopper-wgmma", "e5m2", "e5m2", {"k": 2}, lanes, 1)
    fields = dict(name="formal-2x2", rows=2, cols=2, interleave=2,
                  a_buffer=Buffer(bytes=4096, bandwidth=2),
                  b_buffer=Buffer(bytes=4096, bandwidth=3))
    return ArraySpec(unit=spec, microarch=ua, **(fields | changes))


def prove_array(array: ArraySpec, *, solver: str = "yices", timeout: float = 600,
                jobs: int = 2, out_dir: Path | str = "mxsim-prove", data: bool = False,
                depth: int | None = None, array_cls: type | None = None,
                induction: bool = False, checks: tuple[str, ...] | None = None,
                split: bool = True, progress=None) -> list[Proof]:
    """Prove ``array_cls`` (default: ``hdl.array.DotProductArray``) of ``array`` against its
    handshake contract; a :class:`~testbenches.formal.prove.Proof` row per check.

    Parameters
    ----------
    array : ArraySpec
        An array the RTL builds (:func:`mxsim.array.check_rtl`).
    solver, timeout, jobs, out_dir
        As :func:`testbenches.formal.prove.prove_unit`: the SMT solver, seconds per check,
        checks at once, and the folder (``<out_dir>/array/checkNNN`` per check).
    data : bool
        Check each unit's beat and D too (the values checks of ``ArrayStream``).
    depth : int, optional
        Cycles from reset (bmc) or the induction length; default
        :func:`hdl.formal.array.array_depth`.
    array_cls : type, optional
        A subclass of ``DotProductArray`` (a mutant) to prove instead.
    induction : bool
        k-induction instead of a bounded check (the harness holds no invariant about the
        array's registers: expect ``UNKNOWN``).
    checks : tuple of str, optional
        Only the checks of these names.
    split : bool
        One job per check (default); False: every check in one job, one row named
        ``every check`` (quicker in all; a failure there does not say which check failed:
        run the checks apart for that). Not with ``checks``.
    progress : callable, optional
        Called with each row as it is done.

    Raises
    ------
    MicroArchError
        One line, for an array the RTL does not build.
    ValueError
        A bad solver, depth or timeout, or a check name the harness does not have.
    """
    from amaranth.back import rtlil

    from hdl.array import DotProductArray
    from hdl.formal.array import ArrayStream, array_depth
    harness = ArrayStream((array_cls or DotProductArray)(array), data=data)
    text = rtlil.convert(harness, name="top", ports=harness.ports)
    names = list(enumerate(harness.checks, 1))
    if checks is not None:
        unknown = sorted(set(checks) - set(harness.checks))
        if unknown:
            raise ValueError(f"Check must be one of the harness's, not {unknown[0]!r}")
        names = [(sel, name) for sel, name in names if name in checks]
    if not split:
        if checks is not None:
            raise ValueError(f"checks must be None when split is False, not {checks!r}")
        names = [(0, "every check")]
    depth = array_depth(array) if depth is None else depth
    mode = "prove" if induction else "bmc"
    out_dir = Path(out_dir)

    def run(task: tuple[int, str]) -> Proof:
        sel, name = task
        work = out_dir / HARNESS / (f"check{sel:03d}" if sel else "all")
        res = run_sby({"top.il": text}, _script(sel, array.units), workdir=work, mode=mode,
                      depth=depth, solver=solver, timeout=timeout)
        row = _row(name, res)
        if progress is not None:
            progress(row)
        return row

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(run, names))


def _script(sel: int, units: int) -> str:
    """Load the harness, cut every unit's D free (the pack stage's code: ``$anyseq``; a run
    where the stage is not found is an ERROR, not a proof with the datapath left in) and keep
    check ``sel`` (0: all)."""
    return (f"read_rtlil top.il\nhierarchy -top top\nproc\n"
            f"select -assert-mod-count {units} {_PACK}\ncutpoint {_PACK}\n"
            f"cd top\nconnect -set sel 16'd{sel}\ncd ..\nprep -top top")


def _row(check: str, res: ProofResult) -> Proof:
    return Proof(harness=HARNESS, check=check,
                 method="k-induction" if res.mode == "prove" else "bmc", depth=res.depth,
                 solver=res.solver, status=res.status, seconds=round(res.seconds, 1),
                 message=res.message, trace=str(res.trace) if res.trace else None)
