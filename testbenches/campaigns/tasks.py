"""A verification chunk as a campaign task: what a worker runs for
:mod:`testbenches.campaigns.pairs`.

:func:`run_chunk` takes a JSON-able dictionary (the unit spec, lanes, stages, simulator, the
pair's run of ``dots`` in chunks of ``chunk`` from ``seed``, and the chunk indices ``chunks`` =
``[first, end)`` it runs), builds or reuses the design's Verilated model in the build cache
(:mod:`testbenches.sim.build_cache`, keyed by the RTL hash; a damaged entry is rebuilt and named in
the result's ``repaired``), runs :func:`testbenches.unit.verify.verify`
on those chunks only (chunk ``i`` has the stimulus it has in a whole run: the docs' figures stay
comparable) and returns counts, the first mismatches, the coverage hits (merged across tasks by
adding them; ``[point, [[bin, hits], ...]]`` lists, an order that a store sorting keys keeps),
cycles and seconds. :func:`key_parts` is everything that determines that result.

    python -m testbenches.campaigns.tasks '{"spec": {...}, ...}'   # one task, in this process
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from mxsim import campaign
from mxsim.design import resolve_design
from mxsim.microarch import MicroArch
from mxsim.spec import UnitSpec, from_dict
from mxsim.versions import installed

from ..sim import build_cache
from ..sim.backend import Run, Stimulus, design_tag
from ..unit.verify import backend_for, verify

__all__ = ["run_chunk", "key_parts", "sources_digest", "TOOLS", "MISMATCHES_KEPT"]

#: The tools whose versions a chunk's result depends on (and the campaign JSON records).
TOOLS = ("verilator", "amaranth", "numpy")
#: Mismatches a task returns in full (the counts cover all of them).
MISMATCHES_KEPT = 20
_ROOT = Path(__file__).resolve().parents[2]


def sources_digest(folders: tuple[str, ...] = ("mxsim", "hdl", "testbenches")) -> str:
    """A hash (16 hex digits) of the sources under ``folders`` of this checkout (Python and
    C++): the RTL generator, the harness, the checker and the engine that a result stands for."""
    return campaign.sources_digest(_ROOT, folders, (".py", ".cpp"))


def key_parts(args: dict) -> dict:
    """What determines :func:`run_chunk`'s result for ``args``: the spec's digest, the design
    (lanes, stages), the simulator and mode, the chunks and their stimulus (dots, chunk, seed),
    the sources (RTL generator, harness, checker: their Verilog is a function of them) and the
    tool versions. Where results and builds are kept is not part of it."""
    spec = from_dict(args["spec"])
    return {"spec_digest": spec.digest(), "a": spec.a_format, "b": spec.b_format,
            "lanes": args["lanes"], "stages": args["stages"], "sim": args["sim"],
            "bulk": args["bulk"], "dots": args["dots"], "chunk": args["chunk"],
            "seed": args["seed"], "chunks": list(args["chunks"]),
            "sources": sources_digest(), "versions": installed(TOOLS)}


def _design(spec: UnitSpec, ua: MicroArch) -> str:
    """The key of what determines a design's Verilog as the harness builds it (for the
    RTL-hash memo): the spec, the micro-architecture, the sources (the generator in hdl/, the
    Verilog's post-processing and the harness in testbenches/) and the tool versions."""
    return build_cache.rtl_key(spec.digest(), f"l{ua.lanes}-s{ua.stages}", sources_digest(),
                               str(installed(TOOLS)))


def _rtl_hash(spec: UnitSpec, ua: MicroArch, cache: Path, repaired: list[str]) -> str:
    """The hash of the design's Verilog (as the bulk harness builds it), the harness and the
    Verilator version: the build cache's key (a damaged memo of it noted in ``repaired``)."""
    def compute() -> str:
        from ..unit.bulk import HARNESS
        from ..unit.faults import verilog_text
        from ..unit.runner import strip_initial_values
        return build_cache.rtl_key(strip_initial_values(verilog_text(spec, ua)),
                                   HARNESS.read_text(), str(installed(("verilator",))))
    return build_cache.memo(cache, _design(spec, ua), compute, repaired)


class CachedBulkBackend:
    """The bulk harness (:class:`testbenches.unit.bulk.BulkBackend`) built into the build cache:
    each task runs the cached executable from a work folder of its own."""
    mode = "bulk C++ harness"
    what = "the bulk C++ harness with Verilator"
    build_seconds = None
    design, max_blocks, takes_c, backpressure = None, None, True, True

    def __init__(self, cache: Path, rtl_hash: str, repaired: list[str]) -> None:
        self.cache, self.rtl_hash, self.repaired = cache, rtl_hash, repaired
        self.built, self.build_seconds_taken = False, 0.0

    def build(self, spec: UnitSpec, microarch: MicroArch, out_dir: Path, *,
              fault: str | None = None) -> None:
        from ..unit import bulk
        self._spec, self._microarch = spec, microarch
        t0 = time.perf_counter()
        folder, self.built = build_cache.ensure(
            self.cache, f"bulk-{self.rtl_hash}",
            lambda tmp: bulk.build(spec, microarch, tmp, fault=fault), self.repaired)
        self.build_seconds_taken = time.perf_counter() - t0
        work = Path(out_dir) / "obj"
        work.mkdir(parents=True, exist_ok=True)
        self._exe = work / "Vmx_dot"
        self._exe.unlink(missing_ok=True)
        self._exe.symlink_to(folder / "obj" / "Vmx_dot")

    def run(self, vs, stimulus: Stimulus, *, name: str = "run") -> Run:
        from ..unit import bulk
        return bulk.run(self._exe, self._spec, self._microarch, vs, stimulus)

    def with_waves(self) -> None:
        return None


def run_chunk(args: dict) -> dict:
    """One verification task (see the module docstring): the chunks ``args["chunks"]`` of the
    pair's run, their counts, mismatches (the first :data:`MISMATCHES_KEPT`), coverage hits
    and the coverpoints expected, cycles, seconds, the RTL hash and whether it built."""
    t0 = time.perf_counter()
    if args.get("sources", sources_digest()) != sources_digest():
        raise RuntimeError(f"this worker's mxsim sources (digest {sources_digest()}) are not the "
                           f"client's ({args['sources']}): run the same checkout on every worker")
    spec, ua = resolve_design(from_dict(args["spec"]), lanes=args["lanes"],
                              stages=args["stages"])
    cache = build_cache.cache_dir(args.get("cache"))
    repaired: list[str] = []                 # damaged build-cache entries rebuilt here
    # Amaranth's simulator runs the Amaranth design itself: no Verilog, no RTL hash.
    rtl = (None if args["sim"] == "amaranth" and not args["bulk"]
           else _rtl_hash(spec, ua, cache, repaired))
    first, end = args["chunks"]
    backend = (CachedBulkBackend(cache, rtl, repaired) if args["bulk"]
               else backend_for(args["sim"]))
    with tempfile.TemporaryDirectory(prefix="mxsim-chunk-") as scratch:
        out = (Path(args["out"]) / design_tag(spec, ua) / f"chunks{first}-{end}"
               if args.get("out") else Path(scratch))
        rep = verify(spec, ua, sim=args["sim"], dots=args["dots"], seed=args["seed"],
                     chunk=args["chunk"], out_dir=out, progress=False, backend=backend,
                     chunks=range(first, end))
    built = getattr(backend, "built", None)
    return {"unit": spec.name, "spec_digest": spec.digest(), "rtl_hash": rtl,
            "chunks": [first, end], "dots": rep.dots, "blocks": rep.beats,
            "cycles": rep.cycles, "value_mismatches": rep.value_mismatches,
            "cycle_mismatches": rep.cycle_mismatches,
            "mismatches": [m.to_dict() for m in rep.mismatches[:MISMATCHES_KEPT]],
            "coverage": [[point, list(bins.items())]
                         for point, bins in rep.coverage.hits.items()],
            "expected": sorted(rep.coverage.expected),
            "failing": rep.failing, "replay": rep.replay,
            "build": "none" if built is None else "built" if built else "reused",
            "build_seconds": round(getattr(backend, "build_seconds_taken", 0.0), 3),
            "repaired": repaired,
            "sim_seconds": rep.sim_seconds, "loop_seconds": rep.loop_seconds,
            "seconds": time.perf_counter() - t0, "host": os.uname().nodename}


def main(argv: list[str] | None = None) -> int:
    """Run one task (its JSON arguments) here and print its result: a campaign's replay."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m testbenches.campaigns.tasks 'ARGS-JSON'", file=sys.stderr)
        return 2
    print(json.dumps(run_chunk(json.loads(argv[0])), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
