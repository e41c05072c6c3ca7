"""Runners that execute vector sets on NVIDIA GPUs (import gpu).

Each runner is named for the instruction or library path it drives, says with
``unavailable_reason()`` why it cannot run here, and returns results in the vector-set schema
with the producer recorded. torch is imported inside functions, so ``import gpu`` works on any
machine; the code runs from a plain checkout (``PYTHONPATH=.``) on the GPU machine.
:mod:`gpu.cli` holds the ``mxsim gpu`` verb, registered with the command through the
``mxsim.verbs`` entry points (read from pyproject.toml in a plain checkout): ``mxsim`` never
imports this package.
"""

from .device import device_info, torch_unavailable_reason

__all__ = ["device_info", "torch_unavailable_reason"]
