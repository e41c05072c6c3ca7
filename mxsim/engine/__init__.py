"""Numerics engines: ``fast`` (numpy, batched) and ``reference`` (Python fractions), twins."""

from . import fast, reference

__all__ = ["fast", "reference"]
