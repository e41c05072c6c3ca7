"""``UnitSpec``: the arithmetic of one dot-product-add instruction, as data.

A spec is the single source of truth that the engines, the RTL generator, the cycle model, the
GPU comparison and the fitter all read. It is a frozen dataclass, validated when it is built;
variants come from :func:`dataclasses.replace`. It round-trips through TOML and JSON
(:meth:`UnitSpec.to_dict`, :func:`from_dict`, :func:`load`, :meth:`UnitSpec.dumps`) so users can
write their own.

The model (MMA-Sim's truncated fused dot-product-add, generalised): an instruction covers
``k`` consecutive indices of the reduction. Its ``schedule`` splits them into fused steps (groups
of k indices, in order, not necessarily contiguous). In each step:

1. every product ``a·b`` (times its block scales) is exact. With ``upcast``, the operands are
   first converted exactly to that format, whose exponents are then the ones that count (sm_90
   runs FP8 ``mma.sync`` on FP16 operands). With ``fold_scales``, the E8M0 block scales are
   multiplied into the operands in that format first: one RNE rounding each, gradual
   underflow, overflow to Inf, scale code 0x00 read as 0 and 0xFF as NaN (Triton's
   ``dot_scaled`` emulation builds a bf16 scale by shifting the code into bf16's exponent
   field). With ``upcast_specials="finite"``, an IEEE-style format's Inf/NaN codes upcast as
   the numbers their bits spell (Triton's bit-shift E5M2-to-BF16 conversion). A product's
   *alignment exponent* is ``e_a + e_b`` (plus the scale exponents) with significands left in
   [0, 4) (``product="raw"``),
   or the exponent of the exact product (``product="normalized"``). With ``group=G`` (GST-FDPA),
   each run of G products is first summed exactly and that sum times the scale product is one
   term whose alignment exponent is the sum of the two scale exponents.
2. the accumulator term enters the step: C in the instruction's first step (``c_mode="step"``),
   the previous step's result in later steps. Its alignment exponent is its own exponent.
3. zero terms take part in the maximum with exponent ``e_zero``; ``E`` is the largest alignment
   exponent; every term is rounded to a multiple of ``2**(E - frac_bits)`` by ``align``
   (``frac_bits=None``: kept exactly);
4. the rounded terms are summed exactly and the sum is rounded once to ``acc_format`` with
   ``acc_rounding`` (overflow per ``overflow``).

After the last step the result is converted to ``d_format`` (exact for every preset). With
``c_mode="after"``, C does not enter the steps; the instruction ends with
``D = round(C + result)`` to ``d_format`` with ``c_rounding``. A GEMM over a longer K chains
instructions: the D of one is the C of the next. With ``promote_every=P``, every P instructions
the chain restarts from +0 and its result is added into an FP32 running total (which starts as
C) with ``promote_rounding``. An ``epilogue`` applies per-tensor or row-wise FP32 scales to the
FP32 result as cuBLASLt does: ``alpha`` gives ``fl(fl(sa*sb)*D) + 0`` (so a zero is +0) and
``col-row`` gives ``fl(fl(D*sb)*sa)`` (keeping -0), each multiply rounded once to nearest even.
``block-fma`` applies DeepSeek-style block-wise FP32 scales (1x128 for A, 128x128 for B) inside
the main loop, as cuBLASLt does on sm_90: each 128-K chain (promotion from +0) gives a partial
P, and the FP32 running total (C, or +0) becomes ``fma(P, fl(sa*sb), total)``, one rounding to
nearest even with IEEE zero signs.

With ``specials="none"`` the unit knows no NaN or Inf inputs: every code of A, B, the block
scales and C is the finite number its bits spell (E4M3 S.1111.111 is ±480, E5M2's Inf/NaN
codes one more binade, an E8M0 scale 0xFF is 2**128, an FP32 C with exponent field 255 is
2**128·1.m); results beyond the largest finite value still follow ``overflow``, and a value
the unit computed (a step's result, the D passed on as the next instruction's C) keeps its
meaning. With ``reduce="tree"`` an instruction is one GST-FDPA reduction tree instead of fused
steps: its exact group terms (each ``group`` products summed exactly, times the scales) are
added pairwise in a balanced binary tree in index order, ``((t0 + t1) + (t2 + t3)) + ...``,
each node rounded once to ``acc_format`` with ``acc_rounding`` and ``overflow`` (zero signs by
``zero_sign``; NaN and Inf by IEEE 754); C is added after (``c_mode="after"``). A zero GST group
term has its exact sum's sign (a negative sum times a zero scale is -0; a cancelled sum, +0). It
needs ``frac_bits`` null (the terms are exact) and k / group a power of two. ``tree_formats``
gives each level its own format, leaves first; the last one's result is converted to
``d_format`` with ``acc_rounding``. ``zero_sign="c"``: where the instruction's scaled products
sum to exactly zero, D = C (its code; a NaN C gives the NaN code); another exact zero is +0,
-0 when the final rounding (``acc_rounding``; ``c_rounding`` with C after) is toward -Inf (one
exact step, or a tree). With ``scale_sum_bits``, the sum of a product's two E8M0 scale
exponents is held in a two's complement field of that many bits, wrapping or saturating
(``scale_sum_overflow``). A block is any power of two from 1 to 65536 that divides k.
"""

from __future__ import annotations

import enum
import json
import tomllib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from .. import formats
from ..errors import MxsimError, printable
from ..formats import ELEMENT_FORMATS, OPERAND_FORMATS, SCALE_BLOCKS, Overflow, Rounding
from . import rules, widths
from .checks import ENUMS, LATE_ENUMS, LATER_FIELDS, SpecError, few, integer, short
from .policies import (
    Align,
    CMode,
    Epilogue,
    Product,
    Reduce,
    ScaleSumOverflow,
    Specials,
    UpcastSpecials,
    ZeroSign,
)
from .widths import MAX_GROUP_BITS, MAX_STEP_SUM_BITS, group_sum_bits, step_sum_bits

__all__ = ["Align", "Product", "CMode", "ZeroSign", "UpcastSpecials", "Epilogue", "Specials",
           "Reduce", "ScaleSumOverflow", "UnitSpec", "SpecError", "from_dict", "load",
           "group_sum_bits", "step_sum_bits", "MAX_GROUP_BITS", "MAX_STEP_SUM_BITS",
           "ELEMENT_FORMATS", "OPERAND_FORMATS", "OUTPUT_FORMATS", "SCALE_BLOCKS"]

OUTPUT_FORMATS = ("fp32", "fp16", "bf16")
MAX_FRAC_BITS = 40        # keeps room in an int64 step sum for k terms (see step_sum_bits)
#: The widest instruction: a fused step of every index at once beyond any hardware's (k = 16 to
#: 256); bounds the memory of schedules, steps and RTL.
MAX_K = 1 << 16
#: e_zero beyond +-E_ZERO_LIMIT changes no result: every non-zero term's exponent (products
#: with E8M0 scales, upcast or not, bf16/tf32 products from 2**-272 to 2**256; C;
#: accumulators) lies within about [-300, 300], so a lower
#: e_zero is below all of them, and with a higher one every non-zero term of a step lies below
#: its LSB 2**(e_zero - 40), where it truncates to 0 or rounds to a sum that overflows.
E_ZERO_LIMIT = 1024
#: Fields that may be null (TOML spells it "none").
NULLABLE = ("scale_format", "block", "k", "schedule", "frac_bits", "upcast", "group",
            "nan_code", "promote_every", "epilogue", "tree_formats", "scale_sum_bits")
#: Integer fields (bool is not an integer here; numpy integers are taken as ints).
_INT_FIELDS = ("block", "k", "frac_bits", "group", "e_zero", "nan_code", "promote_every",
               "scale_sum_bits")


@dataclass(frozen=True, kw_only=True)
class UnitSpec:
    """The arithmetic of one dot-product-add instruction (see the module docstring)."""
    name: str = "custom"
    instruction: str = ""              #: PTX qualifier or library call it models
    a_format: str = "e4m3"
    b_format: str = "e4m3"
    scale_format: str | None = None    #: None, "e8m0" or "ue4m3"
    block: int | None = None           #: elements per scale along K
    scale_sum_bits: int | None = None  #: two's complement bits of the scale-exponent sum
    scale_sum_overflow: ScaleSumOverflow = ScaleSumOverflow.WRAP   #: beyond them
    k: int | None = 32                 #: instruction K; None: the whole reduction at once
    schedule: tuple[tuple[int, ...], ...] | None = None   #: fused steps; None: one step
    frac_bits: int | None = 13         #: F; None: terms are kept exactly
    align: Align = Align.RZ
    product: Product = Product.RAW
    upcast: str | None = None          #: operands converted (exactly) to this format first
    fold_scales: bool = False          #: E8M0 scales multiplied into the upcast operands
    upcast_specials: UpcastSpecials = UpcastSpecials.IEEE   #: FINITE: E5M2 Inf/NaN as numbers
    specials: Specials = Specials.IEEE   #: NONE: every input code is a finite number
    group: int | None = None           #: GST-FDPA group size G
    reduce: Reduce = Reduce.CHAIN      #: TREE: group terms added in a tree of roundings
    tree_formats: tuple[str, ...] | None = None   #: per tree level; None: acc_format
    c_mode: CMode = CMode.STEP
    c_rounding: Rounding = Rounding.RNE
    acc_format: str = "e8m13"
    acc_rounding: Rounding = Rounding.RZ
    d_format: str = "fp32"             #: C and D of the instruction (C of the next one)
    e_zero: int = -133
    overflow: Overflow = Overflow.INF
    zero_sign: ZeroSign = ZeroSign.POSITIVE
    nan_code: int | None = None        #: NaN result code; None: all-ones payload, +
    promote_every: int | None = None
    promote_rounding: Rounding = Rounding.RNE
    epilogue: Epilogue | None = None   #: how FP32 scales are applied; None: no FP32 scales
    provenance: str = ""

    def __post_init__(self) -> None:
        self._normalise()
        # The rules, in the order a spec that breaks several names them.
        self._check_element_formats()
        self._check(rules.upcast_problem(self))
        self._check_accumulator()
        self._check_scales()
        self._check_epilogue()
        self._check_scale_block()
        self._check_instruction()
        self._check_schedule()
        self._check_group()
        self._check_reduce()
        self._check_later()
        self._check(rules.specials_problem(self))
        self._check_sums()
        self._check_text()

    def _normalise(self) -> None:
        """Enum-valued fields given as strings become their enum, numpy integers ints and the
        schedule tuples; anything else of the wrong type is refused by name."""
        for name in ("name", "instruction", "provenance"):
            if not isinstance(getattr(self, name), str):
                raise SpecError(f"Unit spec {short(repr(self.name))}: {name} must be a "
                                f"string, not {short(repr(getattr(self, name)))}")
        for name, kind in ENUMS.items():
            object.__setattr__(self, name, formats.choice(
                kind, getattr(self, name), f"Unit spec {self.name!r}: {name}", SpecError))
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if value is None and name in NULLABLE:
                continue
            object.__setattr__(self, name, integer(
                value, f"Unit spec {self.name!r}: {name} must be an integer"
                       f"{' or null' if name in NULLABLE else ''}"))
        for name in ("a_format", "b_format", "acc_format", "d_format", "upcast",
                     "scale_format", "epilogue", "upcast_specials"):
            value = getattr(self, name)
            if not (isinstance(value, str) or (value is None and name in NULLABLE)):
                raise SpecError(f"Unit spec {self.name!r}: {name} must be a string"
                                f"{' or null' if name in NULLABLE else ''}, not "
                                f"{short(repr(value))}")
        for name, kind in LATE_ENUMS.items():
            value = getattr(self, name)
            if value is not None and value in set(kind):
                object.__setattr__(self, name, kind(value))
        if self.schedule is not None:
            steps = self.schedule
            ok = isinstance(steps, (list, tuple)) and len(steps) <= MAX_K and all(
                isinstance(step, (list, tuple)) and len(step) <= MAX_K for step in steps)
            try:
                if not ok:
                    raise TypeError
                # A plain int is taken as it is: a schedule may hold MAX_K indices.
                sched = tuple(tuple(i if type(i) is int else integer(i, "") for i in step)
                              for step in steps)
            except (TypeError, SpecError):
                raise SpecError(f"Unit spec {self.name!r}: schedule must be a list of lists "
                                f"of k indices, not {short(repr(self.schedule))}") from None
            object.__setattr__(self, "schedule", sched)
        object.__setattr__(self, "tree_formats", rules.tree_formats_value(self.tree_formats,
                                                                          self.name))

    def _fail(self, msg: str) -> SpecError:
        return SpecError(f"Unit spec {self.name!r}: {msg}")

    def _check(self, problem: str | None) -> None:
        """Raise a rule's problem (:mod:`.rules`), if any, naming the spec."""
        if problem:
            raise self._fail(problem)

    def _check_element_formats(self) -> None:
        """A and B are operand formats; scales go with MX element formats only."""
        problem = widths.operand_problem(self.a_format, self.b_format, self.scale_format)
        if problem:
            raise self._fail(problem)

    def _check_accumulator(self) -> None:
        """D is FP32, FP16 or BF16; the accumulator an IEEE-style format of 5 or more exponent
        bits."""
        fail = self._fail
        if self.d_format not in OUTPUT_FORMATS:
            raise fail(f"d_format must be one of {', '.join(OUTPUT_FORMATS)}, not "
                       f"{self.d_format!r}")
        try:
            acc = formats.get(self.acc_format)
        except MxsimError:
            acc = None
        # The wide eXmY formats (e10m11) are tree levels' (tree_formats), not accumulators.
        if acc is None or acc.exp_bits < 5 or acc.specials is not formats.Specials.IEEE \
                or (acc.name not in formats.FORMATS and acc.exp_bits != 8):
            raise fail(f"acc_format must be fp32, fp16, bf16 or e8m1..e8m22, not "
                       f"{self.acc_format!r}")

    def _check_scales(self) -> None:
        """The scale format is known."""
        fail = self._fail
        if self.scale_format not in (None, "e8m0", "ue4m3", "fp32"):
            raise fail(f"scale_format must be null, e8m0, ue4m3 or fp32, not "
                       f"{self.scale_format!r}")

    def _check_epilogue(self) -> None:
        """An epilogue applies FP32 scales to the FP32 result of a truncated unit."""
        fail = self._fail
        if self.epilogue is not None:
            if not isinstance(self.epilogue, Epilogue):
                raise fail(f"epilogue must be null or one of {', '.join(Epilogue)}, not "
                           f"{self.epilogue!r}")
            block = 128 if self.epilogue is Epilogue.BLOCK_FMA else None
            if self.scale_format != "fp32" or self.block != block or self.exact \
                    or self.d_format != "fp32":
                raise fail("an epilogue applies fp32 scales to the FP32 result of a non-exact "
                           "unit: per tensor or row-wise (block null) for alpha and col-row, "
                           "in 128-blocks for block-fma")
            if self.epilogue is Epilogue.BLOCK_FMA and (self.k is None or self.promote_every is None
                                                 or self.k * self.promote_every != 128):
                raise fail("block-fma scales each 128-K partial sum: it needs promote_every "
                           "* k == 128")

    def _check_scale_block(self) -> None:
        """FP32 scales need exact sums or an epilogue; block scales a power-of-two block."""
        fail = self._fail
        if self.scale_format == "fp32":
            # FP32 scales (per tensor, row-wise, 128-blocks) are applied outside the tensor
            # core: exactly by the exact arithmetic, or by an epilogue after the chain.
            if not self.exact and self.epilogue is None:
                raise fail("fp32 scales need the exact arithmetic (k and frac_bits null) or "
                           "an epilogue")
            if self.block not in (None, 128):
                raise fail(f"block must be null or 128 for fp32 scales, not {self.block!r}")
        elif (self.scale_format is None) != (self.block is None):
            raise fail("scale_format and block go together (both set or both null)")
        else:
            self._check(rules.block_problem(self.block))

    def _check_instruction(self) -> None:
        """k, frac_bits and e_zero are in range; k is a multiple of the block."""
        fail = self._fail
        if self.k is None and self.frac_bits is not None:
            raise fail(f"k must be an integer from 1 to {MAX_K} when frac_bits is set (only "
                       f"the exact unit, frac_bits = null, has no instruction k), not null")
        if self.k is not None:
            if not 1 <= self.k <= MAX_K:
                raise fail(f"k must be an integer from 1 to {MAX_K} or null, not {self.k!r}")
            if self.block is not None and self.k % self.block \
                    and self.epilogue is not Epilogue.BLOCK_FMA:
                raise fail(f"k ({self.k}) must be a multiple of the block ({self.block})")
        if self.frac_bits is not None and not 0 <= self.frac_bits <= MAX_FRAC_BITS:
            raise fail(f"frac_bits must be between 0 and {MAX_FRAC_BITS} (or null for "
                       f"exact), not {self.frac_bits!r}")
        if not -E_ZERO_LIMIT <= self.e_zero <= E_ZERO_LIMIT:
            raise fail(f"e_zero must be between {-E_ZERO_LIMIT} and {E_ZERO_LIMIT} (beyond, "
                       f"zeros align as at the bound), not {self.e_zero!r}")

    def _check_schedule(self) -> None:
        """The fused steps cover the k indices once each."""
        fail = self._fail
        if self.schedule is not None:
            if self.k is None:
                raise fail("a schedule needs an instruction k")
            # Counted once (linear time): a schedule may have MAX_K steps.
            counts = Counter(i for step in self.schedule for i in step)
            missing = sorted(set(range(self.k)) - counts.keys())
            repeated = sorted(i for i, n in counts.items() if n > 1)
            outside = sorted(i for i in counts if not 0 <= i < self.k)
            if missing or repeated or outside or any(not s for s in self.schedule):
                parts = [f"missing {few(missing)}" if missing else "",
                         f"repeated {few(repeated)}" if repeated else "",
                         f"outside 0..{self.k - 1}: {few(outside)}" if outside else "",
                         "an empty step" if any(not s for s in self.schedule) else ""]
                raise fail(f"schedule must cover k indices 0..{self.k - 1} exactly once "
                           f"({'; '.join(p for p in parts if p)})")

    def _check_group(self) -> None:
        """A GST-FDPA group divides the block, fits its sum, and tiles every step."""
        fail = self._fail
        if self.group is not None:
            if self.scale_format is None:
                raise fail("group (GST-FDPA) needs block scales")
            if self.group < 1 or (self.block or 0) % self.group:
                raise fail(f"group ({self.group}) must divide the block ({self.block})")
            width = group_sum_bits(self.a_format, self.b_format, self.group)
            if width > MAX_GROUP_BITS:
                raise fail(f"a group sum of {self.group} {self.a_format} x {self.b_format} "
                           f"products needs {width} bits of fixed point, more than "
                           f"{MAX_GROUP_BITS}; GST-FDPA groups take narrow formats (FP4, FP6, "
                           f"E4M3)")
            for step in self.steps():
                if len(step) % self.group or any(
                        step[i + 1] != step[i] + 1 for i in range(len(step) - 1)):
                    raise fail(f"with group {self.group}, every step must be a contiguous "
                               f"run of whole groups")

    def _check_reduce(self) -> None:
        """A reduction tree adds the exact GST group terms of one whole instruction."""
        fail = self._fail
        if self.reduce is not Reduce.TREE:
            return
        if self.group is None:
            raise fail("reduce tree adds GST-FDPA group terms: it needs group and scales")
        if self.k is None or self.frac_bits is not None:
            raise fail("reduce tree adds exact group terms: it needs an instruction k and "
                       "frac_bits null")
        if len(self.steps()) > 1:
            raise fail("reduce tree is one tree per instruction: schedule must be null (one "
                       "step)")
        terms = self.k // self.group
        if terms & (terms - 1):
            raise fail(f"reduce tree is a balanced binary tree: k / group must be a power of "
                       f"two, not {self.k} / {self.group} = {terms}")
        if self.c_mode is not CMode.AFTER:
            raise fail("reduce tree adds C to the tree's result: c_mode must be after")

    def _check_later(self) -> None:
        """zero_sign c, tree_formats and the scale-exponent sum field (:mod:`.rules`)."""
        problem, names = rules.tree_formats_problem(self)
        self._check(rules.zero_sign_problem(self) or problem or rules.scale_sum_problem(self))
        object.__setattr__(self, "tree_formats", names)

    def _check_sums(self) -> None:
        """A step sum fits int64; promotion and the NaN code fit the output."""
        fail = self._fail
        if self.frac_bits is not None and self.k is not None \
                and step_sum_bits(self) > MAX_STEP_SUM_BITS:
            raise fail(f"k = {self.k} and frac_bits = {self.frac_bits} give a step sum of up "
                       f"to {step_sum_bits(self)} bits; the engines sum in int64 (at most "
                       f"{MAX_STEP_SUM_BITS} bits): lower k or frac_bits")
        if self.promote_every is not None and self.promote_every < 1:
            raise fail(f"promote_every must be a positive integer or null, not "
                       f"{self.promote_every!r}")
        if self.promote_every is not None and (self.k is None or self.d_format != "fp32"):
            raise fail("promotion needs an instruction k and d_format fp32")
        if self.nan_code is not None:
            d = formats.get(self.d_format)
            if not (0 <= self.nan_code < (1 << d.bits)
                    and d.classify(self.nan_code) == formats.Class.NAN):
                raise fail(f"nan_code must be a NaN code of {self.d_format}, not "
                           f"{self.nan_code!r}")

    def _check_text(self) -> None:
        """name, instruction and provenance are printable text: they are shown on terminals
        (``mxsim run`` prints the name), where a control character would move the cursor,
        clear the screen or forge a line. Checked last, so that a sweep's design name, which
        quotes its values, names a bad value's own rule first."""
        for name in ("name", "instruction", "provenance"):
            value = getattr(self, name)
            if not value.isprintable():
                bad = next(ch for ch in value if not ch.isprintable())
                whose = "" if name == "name" else f" {short(repr(self.name))}"
                raise SpecError(f"Unit spec{whose}: {name} must be printable text on one line, "
                                f"without control or format characters, not "
                                f"{short(repr(value))} (which holds {bad!r})")

    # -- derived --------------------------------------------------------------------------

    def steps(self) -> tuple[tuple[int, ...], ...]:
        """The fused steps of one instruction (one step of all k by default)."""
        if self.schedule is not None:
            return self.schedule
        if self.k is None:
            raise ValueError("a spec with k=None has no fixed steps")
        return (tuple(range(self.k)),)

    def tree_level_formats(self) -> tuple[str, ...]:
        """The format each level of a reduction tree rounds to, leaves first: ``tree_formats``,
        or ``acc_format`` at every level (none for a lone term, k = group)."""
        if self.reduce is not Reduce.TREE:
            raise ValueError(f"Spec must have reduce tree for tree levels, not {self.name!r}")
        return self.tree_formats or (self.acc_format,) * rules.tree_levels(self.k, self.group)

    @property
    def sum_format(self) -> str:
        """The format an instruction's result has before it becomes ``d_format``: the last tree
        level's, or ``acc_format``."""
        if self.reduce is Reduce.TREE and self.tree_formats:
            return self.tree_formats[-1]
        return self.acc_format

    @property
    def d_nan(self) -> int:
        """NaN code of D (``nan_code``, or the positive all-ones-payload NaN)."""
        if self.nan_code is not None:
            return self.nan_code
        d = formats.get(self.d_format)
        return (1 << (d.bits - 1)) - 1

    @property
    def exact(self) -> bool:
        """True for the single-rounding ``exact`` arithmetic (no alignment loss, one step)."""
        return self.k is None and self.frac_bits is None

    def check_operands(self, a_format: str, b_format: str, scale_format: str | None,
                       block: int | None, c_format: str | None) -> None:
        """Raise UnitError unless vectors of these formats fit this spec (``c_format`` None:
        the vectors have no C)."""
        from ..errors import UnitError
        if (a_format, b_format) != (self.a_format, self.b_format):
            raise UnitError(f"Unit {self.name} is specified for {self.a_format} x "
                            f"{self.b_format}, not {a_format} x {b_format}")
        if (scale_format, block) != (self.scale_format, self.block):
            want = f"{self.scale_format} scales in blocks of {self.block}" \
                if self.scale_format else "no block scales"
            got = f"{scale_format} scales in blocks of {block}" if scale_format \
                else "no block scales"
            raise UnitError(f"Unit {self.name} takes {want}, not {got}")
        if c_format is not None and c_format != self.d_format:
            raise UnitError(f"Unit {self.name} takes C as {self.d_format}, not {c_format}; "
                            f"generate vectors with --c-format {self.d_format}")

    def check_vectors(self, vs: Any) -> None:
        """Raise UnitError unless a vector set can run on this spec (formats, K, scales)."""
        from ..errors import UnitError
        if self.exact:
            return
        self.check_operands(vs.a_format, vs.b_format, vs.scale_format, vs.block,
                            None if vs.c is None else vs.c_format)
        if vs.tensor_scale is not None:
            raise UnitError(f"Unit {self.name} does not apply an NVFP4 tensor_scale (cuBLAS "
                            f"applies it outside the tensor core); only the exact unit takes it")
        self.check_k(vs.k)

    def check_k(self, k: int) -> None:
        """Raise UnitError unless a product's K chains through this unit's instructions (any
        K does on an exact unit, which has none)."""
        from ..errors import UnitError
        if not self.exact and k % self.k:
            raise UnitError(f"K ({k}) must be a multiple of unit {self.name}'s instruction "
                            f"k ({self.k})")

    # -- serialisation ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain data (enums as their names, the schedule as lists), TOML/JSON ready.

        ``specials`` and ``reduce`` are left out where they hold their default (``ieee``,
        ``chain``): a spec from before they existed keeps its text and its digest."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in LATER_FIELDS and value is LATER_FIELDS[f.name]:
                continue
            if isinstance(value, enum.Enum):
                value = value.value
            elif f.name == "schedule" and value is not None:
                value = [list(step) for step in value]
            elif f.name == "tree_formats" and value is not None:
                value = list(value)
            out[f.name] = value
        return out

    def dumps(self, fmt: str = "toml") -> str:
        """The spec as TOML or JSON text.

        TOML has no null: a null field is left out where null is its default, and written as
        ``"none"`` where it is not (``k = "none"``, ``frac_bits = "none"`` for exact sums).
        """
        data = self.to_dict()
        if fmt == "json":
            return json.dumps(data, indent=2)
        defaults = {f.name: f.default for f in fields(self)}
        lines = []
        for key, value in data.items():
            if value is None:
                if defaults[key] is None:
                    continue
                value = "none"
            lines.append(f"{key} = {json.dumps(value)}")
        return "\n".join(lines) + "\n"

    def digest(self) -> str:
        """A short hash of every field of :meth:`to_dict` (16 hex digits): the same spec, the
        same digest."""
        import hashlib
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def replace(self, **changes: Any) -> UnitSpec:
        return replace(self, **changes)

    def __str__(self) -> str:
        return self.name


_FIELDS = {f.name for f in fields(UnitSpec)}


def from_dict(data: Mapping[str, Any], *, source: str = "spec") -> UnitSpec:
    """Build a spec from plain data, rejecting unknown keys by name and an empty table."""
    if not isinstance(data, Mapping):
        raise SpecError(f"{source}: a unit spec must be a table of fields, not "
                        f"{type(data).__name__}")
    if not data:
        raise SpecError(f"{source}: a unit spec must set at least one field (it is empty); "
                        f"start from `mxsim units --spec NAME`")
    unknown = sorted(str(k) for k in set(data) - _FIELDS)
    if unknown:
        # printable: a TOML key may spell any character ("\u001b[2J" = 1).
        raise SpecError(f"{source}: unknown key(s) {short(printable(', '.join(unknown)))}; a "
                        f"unit spec has {', '.join(sorted(_FIELDS))}")
    # TOML spells null "none" (see UnitSpec.dumps); only fields that may be null take it.
    data = {k: None if k in NULLABLE and isinstance(v, str) and v.lower() in ("none", "null")
            else v for k, v in data.items()}
    try:
        return UnitSpec(**data)
    except TypeError as exc:
        raise SpecError(f"{source}: {exc}") from None


#: Spec files are a few hundred bytes; a larger one is refused before it is read.
MAX_SPEC_FILE_BYTES = 1 << 20


def load(path: str | Path) -> UnitSpec:
    """Read a spec from a ``.toml`` or ``.json`` file (UTF-8, at most 1 MiB)."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"{p}: no such spec file")
    kind = "JSON" if p.suffix == ".json" else "TOML"
    try:
        size = p.stat().st_size
        if size > MAX_SPEC_FILE_BYTES:
            raise SpecError(f"{p}: a spec file must be at most {MAX_SPEC_FILE_BYTES} bytes, not "
                            f"{size}")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{p}: a spec file must be UTF-8 {kind} text (byte {exc.start} is "
                        f"not UTF-8)") from None
    except OSError as exc:                       # a file the user may not read
        raise SpecError(f"{p}: cannot read the spec file ({exc.strerror or exc})") from None
    try:
        data = json.loads(text) if kind == "JSON" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"{p}: not valid {kind} ({exc})") from None
    except RecursionError:
        raise SpecError(f"{p}: not valid {kind} (nested too deeply)") from None
    try:
        return from_dict(data, source=str(p))
    except SpecError as exc:
        if str(exc).startswith(f"{p}: "):
            raise
        raise SpecError(f"{p}: {exc}") from None          # name the file that broke the rule

