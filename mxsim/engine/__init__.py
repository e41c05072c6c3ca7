"""Numerics engines: ``fast`` (numpy, batched) and ``reference`` (Python fractions), twins;
``gpu`` (:mod:`mxsim.engine.gpu`) runs the fast engine's code on CuPy arrays, bit-equal to it
(imported on use: ``from mxsim.engine import gpu``)."""

from . import fast, reference

__all__ = ["fast", "reference"]
