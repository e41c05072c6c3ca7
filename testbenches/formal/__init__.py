"""Formal proofs of RTL against the spec (mxsim prove): SymbiYosys runs from the YoWASP wheels
with SMT solvers from PyPI (yices, z3), bounded model checks and k-induction over Yosys's
reading of the design, and counterexample traces read back as per-step signal values
(:mod:`testbenches.formal.sby`).
"""

from .sby import SOLVERS, ProofResult, read_trace, run_sby

__all__ = ["SOLVERS", "ProofResult", "read_trace", "run_sby"]
