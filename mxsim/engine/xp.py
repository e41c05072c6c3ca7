"""The engine's array module helper (numpy or CuPy): :mod:`mxsim.formats.xp`, re-exported
for the engine's modules."""

from ..formats.xp import is_numpy, of, to_numpy

__all__ = ["of", "is_numpy", "to_numpy"]
