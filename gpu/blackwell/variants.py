"""Block-scaled MMA variants: which kind, formats, scale format and block each instruction takes.

``BlockScaledVariant`` names one ``mma.sync``/``tcgen05.mma ... .block_scale`` instruction and
is valid by construction; :func:`mma_sync_variants` and :func:`tcgen05_variants` list every
variant the PTX ISA allows (Table 36 for mma.sync, Table 55 for tcgen05.mma), and
:func:`variant_for` picks the one that runs a vector set.
"""

from __future__ import annotations

from dataclasses import dataclass

from mxsim.errors import UnitError
from mxsim.vectors import VectorSet

__all__ = ["F8F6F4_FORMATS", "KINDS", "UNSCALED_KINDS", "RUNNER_KINDS", "PTX_VERSIONS",
           "MMA_SYNC_ARCHS", "TCGEN05_ARCHS", "BlockScaledVariant", "mma_sync_variants",
           "tcgen05_variants", "f8f6f4_variants", "variant_for"]

F8F6F4_FORMATS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
KINDS = ("mxf8f6f4", "mxf4", "mxf4nvf4")
#: ``kind::f8f6f4``: the same operands as ``kind::mxf8f6f4``, no block scales. Its variants
#: have ``scale_format`` None and ``block`` 32: the kernels keep the block-scaled staging (four
#: 32-element "blocks" of K a stage) and load zero scale words that no MMA reads.
UNSCALED_KINDS = ("f8f6f4",)
#: Every kind a runner drives, in ``gpu info`` order.
RUNNER_KINDS = (*KINDS, *UNSCALED_KINDS)
#: PTX ISA version each target needs: 8.7 introduced ``.kind``, ``.block_scale`` and
#: ``kind::mxf4nvf4`` (sm_100a, sm_120a); ptxas 13.0 wants 8.8 for sm_103a and sm_121a.
PTX_VERSIONS = {"sm_100a": "8.7", "sm_103a": "8.8", "sm_120a": "8.7", "sm_121a": "8.8"}
#: Compute capability -> arch-specific PTX target.
MMA_SYNC_ARCHS = {(12, 0): "sm_120a", (12, 1): "sm_121a"}
TCGEN05_ARCHS = {(10, 0): "sm_100a", (10, 3): "sm_103a"}

# -- instruction variants --------------------------------------------------------------------

# (kind, scale_format, block) -> scale_vec, as the ISA allows them (Table 36 for mma.sync, Table
# 55 for tcgen05.mma). ptxas 13.0 rejects mma.sync mxf4nvf4 with 4X/ue8m0 and with 2X/ue4m3.
_MMA_SYNC_SCALES = {("mxf8f6f4", "e8m0", 32): "1X", ("mxf4", "e8m0", 32): "2X",
                    ("mxf4nvf4", "e8m0", 32): "2X", ("mxf4nvf4", "ue4m3", 16): "4X"}
_TCGEN05_SCALES = {**_MMA_SYNC_SCALES, ("mxf4nvf4", "e8m0", 16): "4X"}
_STYPE = {"e8m0": "ue8m0", "ue4m3": "ue4m3"}


@dataclass(frozen=True)
class BlockScaledVariant:
    """One block-scaled MMA: kind, element formats, scale format and block size.

    ``k`` is the instruction's K (32 for ``kind::mxf8f6f4``, 64 for the FP4 kinds) and
    ``blocks_per_mma`` = ``k // block`` is the ``N`` of ``.scale_vec::NX``: how many scale
    factors each row of A (column of B) uses per instruction.
    """
    kind: str
    a_format: str
    b_format: str
    scale_format: str
    block: int

    def __post_init__(self) -> None:
        if self.kind not in RUNNER_KINDS:
            raise ValueError(f"Kind must be one of {', '.join(RUNNER_KINDS)}, not "
                             f"{self.kind!r}")
        allowed = F8F6F4_FORMATS if self.kind in ("mxf8f6f4", "f8f6f4") else ("e2m1",)
        for name in ("a_format", "b_format"):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} of kind::{self.kind} must be one of "
                                 f"{', '.join(allowed)}, not {getattr(self, name)!r}")
        if self.kind in UNSCALED_KINDS:
            if (self.scale_format, self.block) != (None, 32):
                raise ValueError(f"kind::{self.kind} takes no block scales (scale_format None, "
                                 f"block 32), not {self.scale_format} with block "
                                 f"{self.block!r}")
        elif (self.kind, self.scale_format, self.block) not in _TCGEN05_SCALES:
            raise ValueError(f"kind::{self.kind} takes no {self.scale_format} scales with "
                             f"block {self.block!r}")

    @property
    def k(self) -> int:
        return 32 if self.kind in ("mxf8f6f4", "f8f6f4") else 64

    @property
    def scaled(self) -> bool:
        return self.kind not in UNSCALED_KINDS

    @property
    def containers(self) -> str:
        """How the operands are held: the 8-bit containers of ``mxf8f6f4`` (which
        ``kind::f8f6f4`` shares) or packed FP4."""
        return "mxf8f6f4" if self.kind == "f8f6f4" else self.kind

    @property
    def blocks_per_mma(self) -> int:
        return self.k // self.block

    @property
    def scale_vec(self) -> str:
        return f"{self.blocks_per_mma}X"

    @property
    def stype(self) -> str:
        return _STYPE[self.scale_format]

    @property
    def on_mma_sync(self) -> bool:
        """Whether ``mma.sync`` (sm_120a) has this variant; ``tcgen05.mma`` has them all."""
        return not self.scaled or (self.kind, self.scale_format, self.block) in _MMA_SYNC_SCALES

    @property
    def mma_sync_instruction(self) -> str:
        if not self.scaled:
            return (f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.{self.a_format}."
                    f"{self.b_format}.f32")
        shape = "m16n8k32" if self.kind == "mxf8f6f4" else "m16n8k64"
        return (f"mma.sync.aligned.{shape}.row.col.kind::{self.kind}.block_scale."
                f"scale_vec::{self.scale_vec}.f32.{self.a_format}.{self.b_format}.f32."
                f"{self.stype}")

    @property
    def tcgen05_instruction(self) -> str:
        if not self.scaled:
            return f"tcgen05.mma.cta_group::1.kind::{self.kind}"
        return (f"tcgen05.mma.cta_group::1.kind::{self.kind}.block_scale."
                f"scale_vec::{self.scale_vec}")

    @property
    def name(self) -> str:
        if not self.scaled:
            return f"{self.kind}_{self.a_format}_{self.b_format}"
        return f"{self.kind}_{self.a_format}_{self.b_format}_{self.scale_format}_b{self.block}"


def _variants(table: dict) -> list[BlockScaledVariant]:
    out = []
    for kind, scale_format, block in table:
        pairs = ([(a, b) for a in F8F6F4_FORMATS for b in F8F6F4_FORMATS]
                 if kind == "mxf8f6f4" else [("e2m1", "e2m1")])
        out += [BlockScaledVariant(kind, a, b, scale_format, block) for a, b in pairs]
    return out


def mma_sync_variants() -> list[BlockScaledVariant]:
    """Every variant ``mma.sync ... block_scale`` allows: 25 format pairs of mxf8f6f4 + 3."""
    return _variants(_MMA_SYNC_SCALES)


def tcgen05_variants() -> list[BlockScaledVariant]:
    """Every variant ``tcgen05.mma ... block_scale`` allows: the mma.sync ones + 4X/ue8m0."""
    return _variants(_TCGEN05_SCALES)


def f8f6f4_variants() -> list[BlockScaledVariant]:
    """``kind::f8f6f4`` (no scales) on both instructions: the 25 format pairs."""
    return [BlockScaledVariant("f8f6f4", a, b, None, 32) for a in F8F6F4_FORMATS
            for b in F8F6F4_FORMATS]


def variant_for(vs: VectorSet, kind: str, mma_sync: bool) -> BlockScaledVariant:
    """The variant of ``kind`` that runs ``vs``, or a one-line UnitError saying why none does."""
    if kind in UNSCALED_KINDS:
        if vs.scale_format is not None:
            raise UnitError(f"kind::{kind} takes no block scales, not {vs.scale_format}")
        try:
            return BlockScaledVariant(kind, vs.a_format, vs.b_format, None, 32)
        except ValueError as exc:
            raise UnitError(f"{kind} cannot run this set: {exc}") from None
    if vs.scale_format not in ("e8m0", "ue4m3"):
        raise UnitError(f"kind::{kind} needs e8m0 or ue4m3 block scales, not "
                        f"{vs.scale_format or 'none'}")
    try:
        v = BlockScaledVariant(kind, vs.a_format, vs.b_format, vs.scale_format, int(vs.block))
    except ValueError as exc:
        raise UnitError(f"{kind} cannot run this set: {exc}") from None
    if mma_sync and not v.on_mma_sync:
        raise UnitError(f"mma.sync kind::{kind} takes no {v.scale_format} scales with block "
                        f"{v.block} (only tcgen05.mma does)")
    return v

