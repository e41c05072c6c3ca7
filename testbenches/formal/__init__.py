"""Formal proofs of RTL against the spec (mxsim prove): SymbiYosys runs from the YoWASP wheels
with SMT solvers from PyPI (yices, z3), bounded model checks and k-induction over Yosys's
reading of the design, and counterexample traces read back as per-step signal values
(:mod:`testbenches.formal.sby`).

- :mod:`.prove`: the generated unit (or a mutant) against the reference circuit, whole or
  by the compositional obligations, and the mutant table;
- :mod:`.array`: an array's handshake contract (``prove --array``), with
  :mod:`.array_faults`, its handshake mutants;
- :mod:`.foreign` and :mod:`.rtl_miter`: users' RTL behind a port map (``prove --rtl``);
- :mod:`.cli`: the ``prove`` verb.
"""

from .sby import SOLVERS, ProofResult, read_trace, run_sby

__all__ = ["SOLVERS", "ProofResult", "read_trace", "run_sby"]
