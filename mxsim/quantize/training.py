"""Training recipes as data: how each operand of a linear layer's three GEMMs is quantised.

A linear layer ``y = x W^T`` runs three GEMMs per step, each ``A (M, K) @ B (K, N)``:

========  ===================  =======  ==================================================
GEMM      A                    B        K
========  ===================  =======  ==================================================
fprop     x (T, I)             W^T      I, the layer's input width
dgrad     dy (T, O)            W        O, the output width (W re-quantised along its rows)
wgrad     dy^T (O, T)          x        T, the tokens (both re-quantised along the tokens)
========  ===================  =======  ==================================================

Every operand is quantised along its own GEMM's K (an MX or NVFP4 block never crosses K), so
a tensor used twice is quantised twice, along different axes, as the recipes prescribe.

:class:`Operand` says how one operand is quantised (``cast`` to BF16, ``fp8`` with one FP32
scale per tensor, ``mx`` with E8M0 block scales, ``nvfp4``), with stochastic rounding (``sr``),
a 16 x 16 random Hadamard transform along K (``rht``) or 16 x 16 2-D scale tiles
(``two_d``). :class:`TrainingRecipe` gives the three GEMMs' pairs, the exact unit they run on,
the layers kept in BF16, and the switches that turn one technique off, named as Transformer
Engine names them (``disable_rht``, ``disable_stochastic_rounding``,
``disable_2d_quantization``). :data:`TRAINING_RECIPES` holds the recipes, each citing its
source section by section; :func:`training_recipe` parses ``nvfp4/disable_rht`` and the like.

:func:`quantise` quantises one operand (NumPy FP32 values) into a
:class:`~mxsim.quantize.recipes.Quantised` with the counts a training run reports;
:func:`rht` is the transform, in a fixed FP32 order so that any device gives the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import formats
from .fp8 import to_fp8_amax
from .mx import to_mx
from .nvfp4 import to_nvfp4
from .recipes import Quantised
from .rules import QuantizeError

__all__ = ["Operand", "TrainingRecipe", "TRAINING_RECIPES", "SWITCHES", "GEMMS", "GEMM_TENSORS",
           "SR_BITS", "training_recipe", "quantise", "dequantise", "rht", "rht_signs",
           "OperandStats", "describe"]

GEMMS = ("fprop", "dgrad", "wgrad")
#: The tensor each GEMM's A and B come from.
GEMM_TENSORS = {"fprop": ("x", "w"), "dgrad": ("dy", "w"), "wgrad": ("dy", "x")}
#: Transformer Engine's names for the switches of its NVFP4BlockScaling recipe.
SWITCHES = ("disable_rht", "disable_stochastic_rounding", "disable_2d_quantization")
RHT_SIZE = 16
#: Random bits per stochastically rounded element (:func:`mxsim.formats.round_to`).
SR_BITS = formats.DEFAULT_SR_BITS


@dataclass(frozen=True)
class Operand:
    """How one operand of one GEMM is quantised (along that GEMM's K).

    ``kind``: ``cast`` (each value rounded to nearest even to ``format``, no scale), ``fp8``
    (one FP32 scale per tensor, ``max / amax``: ``scaling`` ``current`` takes this tensor's
    amax, ``delayed`` the largest of the last ``history`` steps' amaxes), ``mx`` (E8M0 scales
    on ``block`` elements, ``scale_rule``), ``nvfp4`` (UE4M3 scales on ``block`` elements
    and one FP32 scale per tensor; ``two_d``: amax over 16 x 16 tiles). ``sr``: elements
    rounded stochastically; ``rht``: a 16 x 16 random Hadamard transform along K first.
    """
    kind: str
    format: str
    block: int | None = None
    scale_rule: str | None = None
    two_d: bool = False
    sr: bool = False
    rht: bool = False
    scaling: str | None = None
    history: int = 16

    def label(self) -> str:
        """One short line: ``mx e4m3/32 rceil``, ``nvfp4 e2m1/16 2d sr rht``..."""
        parts = [self.kind, self.format + (f"/{self.block}" if self.block else "")]
        parts += [self.scale_rule] if self.scale_rule else []
        parts += [self.scaling] if self.scaling else []
        parts += [n for n, on in (("2d", self.two_d), ("sr", self.sr), ("rht", self.rht)) if on]
        return " ".join(parts)


@dataclass(frozen=True)
class TrainingRecipe:
    """A recipe: each GEMM's (A, B) operands, the exact unit the GEMMs run on (and the one
    for layers kept in BF16), the layer names kept in BF16, and its sources."""
    name: str
    summary: str
    fprop: tuple[Operand, Operand]
    dgrad: tuple[Operand, Operand]
    wgrad: tuple[Operand, Operand]
    unit: str
    sources: tuple[str, ...] = ()
    bf16_layers: tuple[str, ...] = ()
    disabled: tuple[str, ...] = field(default=())

    def gemm(self, name: str) -> tuple[Operand, Operand]:
        return {"fprop": self.fprop, "dgrad": self.dgrad, "wgrad": self.wgrad}[name]

    @property
    def switches(self) -> tuple[str, ...]:
        """The switches that change something in this recipe."""
        ops = self.fprop + self.dgrad + self.wgrad
        have = {"disable_rht": any(o.rht for o in ops),
                "disable_stochastic_rounding": any(o.sr for o in ops),
                "disable_2d_quantization": any(o.two_d for o in ops)}
        return tuple(s for s in SWITCHES if have[s] or s in self.disabled)

    def without(self, *switches: str) -> TrainingRecipe:
        """This recipe with techniques switched off (``disable_rht``...)."""
        for s in switches:
            if s not in self.switches:
                allowed = ", ".join(self.switches) or "none"
                raise QuantizeError(f"Recipe {self.name} has no switch {s!r} (switches: "
                                    f"{allowed})")
        off = {"rht": "disable_rht" in switches, "sr": "disable_stochastic_rounding" in switches,
               "two_d": "disable_2d_quantization" in switches}

        def strip(op: Operand) -> Operand:
            return replace(op, **{k: False for k, v in off.items() if v})
        pairs = {g: tuple(strip(o) for o in self.gemm(g)) for g in GEMMS}
        off_now = tuple(dict.fromkeys(self.disabled + tuple(switches)))
        base = self.name.partition("/")[0]
        return replace(self, name=f"{base}/{'+'.join(off_now)}", disabled=off_now,
                       **pairs)


def _cast(fmt: str) -> Operand:
    return Operand("cast", fmt)


_BF16 = _cast("bf16")
_MXFP8_SRC = "Mishra et al., Recipes for Pre-training LLMs with MXFP8, arXiv 2506.08027"
_NVFP4_SRC = "NVIDIA, Pretraining Large Language Models with NVFP4, arXiv 2509.25149"
_MXFP4_SRC = ("Tseng et al., Training LLMs with MXFP4, arXiv 2502.20586; Castro et al., "
              "Quartet, arXiv 2505.14669")


def _mxfp8(rule: str, name: str) -> TrainingRecipe:
    op = Operand("mx", "e4m3", 32, rule)
    return TrainingRecipe(
        name, f"MXFP8: E4M3 for weights, activations and gradients, E8M0 scales on 32 "
              f"elements along each GEMM's own K (scale rule {rule})",
        (op, op), (op, op), (op, op), "blackwell-mxf8f6f4",
        (f"{_MXFP8_SRC} §3 (E4M3 for all tensors, gradients included)",
         f"{_MXFP8_SRC} §4 (the scale rounded up: 2**ceil(log2(amax / max)), torchao's "
         f"RCEIL; the OCP floor rule can saturate and diverge)",
         f"{_MXFP8_SRC} §3 (wgrad's transposed operands re-quantised along their own K)"))


def _nvfp4() -> TrainingRecipe:
    x = Operand("nvfp4", "e2m1", 16)
    w = Operand("nvfp4", "e2m1", 16, two_d=True)
    g = Operand("nvfp4", "e2m1", 16, sr=True)
    return TrainingRecipe(
        "nvfp4", "NVFP4: E2M1, UE4M3 scales on 1 x 16 blocks and an FP32 scale per tensor; "
                 "16 x 16 weight tiles; gradients rounded stochastically; a 16 x 16 random "
                 "Hadamard transform on wgrad's inputs; the output layer in BF16",
        (x, w), (g, w), (replace(g, rht=True), replace(x, rht=True)), "blackwell-mxf4nvf4",
        (f"{_NVFP4_SRC} §2 (the format: 1 x 16 blocks, UE4M3 and FP32 scales)",
         f"{_NVFP4_SRC} §4.1 (layers kept in BF16: here the output layer)",
         f"{_NVFP4_SRC} §4.2 (16 x 16 random Hadamard transforms on wgrad's inputs)",
         f"{_NVFP4_SRC} §4.3 (2-D 16 x 16 weight scales: fprop and dgrad see one W)",
         f"{_NVFP4_SRC} §4.4 (stochastic rounding of gradients)"),
        bf16_layers=("lm_head",))


def _mxfp4() -> TrainingRecipe:
    x = Operand("mx", "e2m1", 32, "floor")
    g = replace(x, sr=True)
    return TrainingRecipe(
        "mxfp4", "MXFP4: E2M1, E8M0 scales on 32 elements; gradients rounded "
                 "stochastically; a 16 x 16 random Hadamard transform on wgrad's inputs; the "
                 "output layer in BF16",
        (x, x), (g, x), (replace(g, rht=True), replace(x, rht=True)), "blackwell-mxf4",
        (f"{_MXFP4_SRC} (stochastic rounding of the backward pass's operands; random "
         f"Hadamard transforms on wgrad's inputs)",),
        bf16_layers=("lm_head",))


def _fp8(scaling: str) -> TrainingRecipe:
    x = Operand("fp8", "e4m3", scaling=scaling)
    g = Operand("fp8", "e5m2", scaling=scaling)
    return TrainingRecipe(
        f"fp8-{scaling}", f"FP8 per tensor ({scaling} scaling): E4M3 weights and activations, "
                          f"E5M2 gradients (Transformer Engine's HYBRID format), one FP32 "
                          f"scale max / amax per tensor",
        (x, x), (g, x), (g, x), "blackwell-f8f6f4",
        ("Micikevicius et al., FP8 Formats for Deep Learning, arXiv 2209.05433 §4 (E4M3 "
         "forward, E5M2 gradients, per-tensor scales)",
         "Transformer Engine, DelayedScaling (amax history of 16 steps, its maximum) and "
         "Float8CurrentScaling"))


#: The recipes by name; ``name/switch+...`` switches techniques off (:func:`training_recipe`).
TRAINING_RECIPES = {r.name: r for r in (
    TrainingRecipe("bf16", "BF16 operands (rounded to nearest even), FP32 accumulation",
                   (_BF16, _BF16), (_BF16, _BF16), (_BF16, _BF16), "blackwell-mma-bf16",
                   ("the baseline of every paper above",)),
    _fp8("delayed"), _fp8("current"),
    _mxfp8("rceil", "mxfp8"), _mxfp8("floor", "mxfp8-floor"),
    _nvfp4(), _mxfp4(),
)}


def training_recipe(name: str | TrainingRecipe) -> TrainingRecipe:
    """The recipe ``name``: one of :data:`TRAINING_RECIPES`, optionally followed by
    ``/switch+switch`` (``nvfp4/disable_rht+disable_stochastic_rounding``)."""
    if isinstance(name, TrainingRecipe):
        return name
    if not isinstance(name, str):
        raise QuantizeError(f"A training recipe is a name such as 'mxfp8', not {name!r}")
    base, _, rest = name.partition("/")
    if base not in TRAINING_RECIPES:
        raise QuantizeError(f"Training recipe must be one of {', '.join(TRAINING_RECIPES)} "
                            f"(optionally /{'+'.join(SWITCHES)}), not {base!r}")
    switches = [s for s in rest.split("+") if s] if rest else []
    return TRAINING_RECIPES[base].without(*switches) if switches else TRAINING_RECIPES[base]


# -- the random Hadamard transform ----------------------------------------------------------

def rht_signs(rng: np.random.Generator) -> npt.NDArray[np.float32]:
    """16 random signs (±1.0) for :func:`rht`, one draw of ``rng.integers(0, 2, 16)``."""
    return np.where(rng.integers(0, 2, RHT_SIZE) == 1, -1.0, 1.0).astype(np.float32)


def rht(x: npt.NDArray[np.float32], signs: npt.NDArray[np.float32], axis: int
        ) -> npt.NDArray[np.float32]:
    """``x`` times ``H S / 4`` on each block of 16 along ``axis`` (H the 16 x 16 Sylvester
    Hadamard matrix, S the diagonal of ``signs``): the signs applied, then four butterfly
    stages ``(u + v, u - v)``, each rounded to FP32, then the exact scaling by 1/4. Applied to
    both of wgrad's operands along the tokens, the product is unchanged in exact arithmetic
    (``(HS/4)^T (HS/4) = I``)."""
    v = np.asarray(x, np.float32)
    ax = axis % v.ndim
    if v.shape[ax] % RHT_SIZE:
        raise QuantizeError(f"The random Hadamard transform takes blocks of {RHT_SIZE}: "
                            f"axis {axis} has length {v.shape[ax]}")
    moved = np.moveaxis(v, ax, -1)
    b = (moved.reshape(-1, RHT_SIZE) * signs).astype(np.float32)
    h = 1
    while h < RHT_SIZE:
        b = b.reshape(-1, RHT_SIZE // (2 * h), 2, h)
        u, w = b[:, :, 0, :], b[:, :, 1, :]
        b = np.stack([u + w, u - w], axis=2).astype(np.float32)
        h *= 2
    out = (b.reshape(moved.shape) * np.float32(0.25)).astype(np.float32)
    return np.ascontiguousarray(np.moveaxis(out, -1, ax))


# -- quantising one operand -------------------------------------------------------------------

@dataclass
class OperandStats:
    """What quantising an operand did: elements, and those saturated (an MX or FP8 element
    whose scaled magnitude exceeded the format's largest, so it was clamped)."""
    elements: int = 0
    saturated: int = 0


def quantise(x: npt.NDArray[np.float32], op: Operand, role: str, *,
             rng: np.random.Generator | None = None, amax_history: list | None = None,
             stats: OperandStats | None = None) -> Quantised:
    """Operand ``x`` (A: K along its last axis; B: along its second to last) quantised as
    ``op`` says. ``rng`` draws the stochastic rounding's bits (``SR_BITS`` per element, C
    order of ``x``); ``amax_history`` (a list, appended to) is a tensor's delayed-scaling
    state; ``stats`` counts elements and saturated ones."""
    if role not in ("a", "b"):
        raise ValueError(f"Role must be 'a' or 'b', not {role!r}")
    axis = -1 if role == "a" else -2
    x = np.ascontiguousarray(x, np.float32)
    bits = None
    if op.sr:
        if rng is None:
            raise ValueError(f"Operand {op.label()} rounds stochastically: pass rng")
        bits = rng.integers(0, 1 << SR_BITS, size=x.shape, dtype=np.uint64)
    rounding = "stochastic" if op.sr else "rne"
    if op.kind == "cast":
        q = Quantised(formats.get(op.format).encode(x, "rne", saturate=False), op.format)
    elif op.kind == "fp8":
        q = _fp8_operand(x, op, amax_history, stats)
    elif op.kind == "mx":
        scale, codes = to_mx(x, op.format, op.block, op.scale_rule, rounding, axis,
                             random_bits=bits, sr_bits=SR_BITS)
        q = Quantised(codes, op.format, scale, "e8m0", op.block)
        if stats is not None:
            stats.saturated += _mx_saturated(x, scale, op, axis)
    elif op.kind == "nvfp4":
        scale, codes, ts = to_nvfp4(x, block=op.block, two_d=op.two_d, rounding=rounding,
                                    axis=axis, random_bits=bits, sr_bits=SR_BITS)
        q = Quantised(codes, op.format, scale, "ue4m3", op.block, np.float32(ts))
    else:
        raise ValueError(f"Operand kind must be cast, fp8, mx or nvfp4, not {op.kind!r}")
    if stats is not None:
        stats.elements += x.size
    return q


def _fp8_operand(x: npt.NDArray[np.float32], op: Operand, history: list | None,
                 stats: OperandStats | None) -> Quantised:
    amax = float(np.abs(x).max()) if x.size else 0.0
    use = amax
    if op.scaling == "delayed":
        if history is None:
            raise ValueError("Delayed scaling needs the tensor's amax history")
        use = max(history) if history else amax
        history.append(amax)
        del history[:-op.history]
    codes, factor = to_fp8_amax(x, op.format, amax=use)
    if stats is not None:
        fmax = formats.get(op.format).max
        stats.saturated += int((np.abs(x.astype(np.float64)) / float(factor) > fmax).sum())
    return Quantised(codes, op.format, factor, "fp32")


def _mx_saturated(x: npt.NDArray[np.float32], scale: npt.NDArray[np.uint8], op: Operand,
                  axis: int) -> int:
    """Elements whose magnitude exceeds the format's largest times their block's scale."""
    s = np.repeat(formats.get("e8m0").decode(scale), op.block, axis=axis)
    fmax = formats.get(op.format).max
    with np.errstate(invalid="ignore"):
        return int((np.abs(x.astype(np.float64)) > fmax * s).sum())


def dequantise(q: Quantised, role: str) -> npt.NDArray[np.float32]:
    """The FP32 values a plain emulation multiplies: the codes times their block scales (and
    an FP32 per-tensor factor), each value rounded once to FP32; an NVFP4 per-tensor scale is
    left out (the emulation multiplies the product by both tensors' scales)."""
    from .mx import from_mx
    from .nvfp4 import from_nvfp4
    axis = -1 if role == "a" else -2
    if q.scale_format is None:
        v = formats.get(q.format).decode(q.codes)
    elif q.scale_format == "e8m0":
        return from_mx(q.scale, q.codes, q.format, q.block, axis, dtype=np.float32)
    elif q.scale_format == "ue4m3":
        return from_nvfp4(q.scale, q.codes, 1.0, q.block, axis, dtype=np.float32)
    else:
        v = formats.get(q.format).decode(q.codes) * np.float64(q.scale)
    return np.asarray(v, np.float64).astype(np.float32)


def describe(r: TrainingRecipe) -> dict[str, Any]:
    """The recipe as JSON: each GEMM's operands, the unit, BF16 layers, sources."""
    return {"name": r.name, "summary": r.summary, "unit": r.unit,
            "bf16_layers": list(r.bf16_layers), "disabled": list(r.disabled),
            **{g: [o.label() for o in r.gemm(g)] for g in GEMMS},
            "sources": list(r.sources)}
