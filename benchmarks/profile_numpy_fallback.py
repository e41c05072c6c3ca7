"""Where the numpy fallback's time goes: ``hopper-wgmma`` on 1M dots of K = 32 (as
``bench_engine.py``'s fallback row) in a process that cannot import numba, on one thread so
that cProfile sees every call, grouped into the float64 step (``engine.wide``), the rounding of
the step sums (``formats.rounding``) and the rest.

    python benchmarks/profile_numpy_fallback.py > docs/data/profiles/numpy_fallback_DATE.txt

Prints the groups' seconds and cProfile's top functions. Speed is measured here, never asserted
in tests.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys

sys.modules["numba"] = None              # as where numba is not installed

from mxsim import presets, vectors  # noqa: E402
from mxsim.engine import fast  # noqa: E402
from mxsim.engine.fast import step  # noqa: E402

_ROUNDING = ("round_sums", "_checked")


def _rounding(key: tuple) -> bool:
    """A cProfile key (file, line, function) of the rounding of the step sums: numpy's
    general rounding, or engine.wide's float64 one."""
    return key[0].endswith("mxsim/formats/rounding.py") or (
        key[0].endswith("mxsim/engine/wide.py") and key[2] in _ROUNDING)


GROUPS = {
    "float64 step (engine.wide)":
        lambda key: key[0].endswith("mxsim/engine/wide.py") and key[2] not in _ROUNDING,
    "rounding of the step sums (formats.rounding, wide.round_sums)": _rounding,
}


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    step._THREADS = 1                    # one thread: cProfile sees only the main thread
    vs = vectors.generate("normal", a_format="e4m3", m=256, n=4096, k=32, with_c=False, seed=1)
    spec = presets.get("hopper-wgmma").spec_for(vs)
    assert fast.path(spec)["path"] == "numpy"
    fast.dot(spec, vs.subset(slice(0, 8)))
    prof = cProfile.Profile()
    prof.enable()
    fast.dot(spec, vs)
    prof.disable()
    stats = pstats.Stats(prof)
    total = stats.total_tt
    print(f"hopper-wgmma, {vs.num_dots:,} dots of K = 32, numpy fallback, one thread, "
          f"under cProfile: {total:.3f} s")
    for name, member in GROUPS.items():
        # Own time of the group's functions, and of the built-in (numpy) calls they make.
        own = sum(v[2] for k, v in stats.stats.items() if member(k))
        called = sum(t for k, v in stats.stats.items() for caller, (_, _, t, _) in v[4].items()
                     if member(caller) and k[0] == "~")
        print(f"  {name}: {own + called:.3f} s")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(20)
    print(out.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
