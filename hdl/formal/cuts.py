"""Cut points in a unit for compositional proofs: taps that copy a stage's signals into the
harness, and free stages whose outputs the solver chooses.

A unit is built from the stage classes its class attributes name (:mod:`hdl.unit`); a
mutant is a unit class with one of them replaced (:mod:`testbenches.unit.faults`). :func:`cut`
derives a subclass of any such unit class (mutant or not) in which

- the block stage copies the C code its block uses (C, or a chained block's feedback), and
  the post pipeline when a block's D leaves its last stage, and its feedback register;
- the accumulate stage's adder tree copies its inputs (each lane's aligned term, and C's),
  each lane's (or GST group's) aligner its inputs (the product, or the group's term),
  the exponent stage's maximum tree its inputs (each product's alignment exponent, and C's),
  and the accumulate stage ``s0``'s pass signals, the block's largest exponent and flags, and
  the sum, into :class:`Taps` the harness owns;
- ``free="terms"``: the lanes' and C's aligners are replaced by free values (``AnySeq``), so
  a proof holds the adder tree and the accumulator to whatever terms arrive;
- ``free="front"``: the exponent and accumulate stages are replaced by free outputs, so a
  proof holds the post pipeline (normalise, round, pack, handshake) to any sum and exponent.

The production RTL has no hooks for this: the classes here override ``elaborate`` and add
assignments to the harness's signals.
"""

from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.asserts import AnySeq
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hdl.stages import exponents_signature, s0_signature, sum_bits, sum_signature, term_bits
from mxsim.microarch import MicroArch
from mxsim.spec import UnitSpec

__all__ = ["Taps", "cut"]


class Taps:
    """The signals a cut unit copies out, owned by the harness."""

    def __init__(self, spec: UnitSpec, ua: MicroArch):
        grouped = spec.group is not None
        #: Terms a pass adds (lanes, or a GST unit's whole groups) and a block's terms.
        self.per_pass = ua.lanes // spec.group if grouped else ua.lanes
        self.terms = spec.k // spec.group if grouped else spec.k
        self.tree_in = [Signal(signed(term_bits(spec) + 1), name=f"tap_tree_in{j}")
                        for j in range(self.per_pass + 1)]
        self.go, self.done = Signal(name="tap_go"), Signal(name="tap_done")
        self.p = Signal(range(max(ua.passes(spec), 2)), name="tap_p")
        self.first = Signal(name="tap_first")
        self.sum = Signal(signed(sum_bits(spec)), name="tap_sum")
        self.e_max = Signal(signed(14), name="tap_e_max")
        self.max_in = [Signal(signed(14), name=f"tap_max_in{j}")
                       for j in range(self.terms + 1)]
        self.nan, self.pinf, self.ninf = (Signal(name=f"tap_{n}") for n in
                                          ("nan", "pinf", "ninf"))
        #: The FP32 code of the C the block in S0 uses (a chained block's: the feedback).
        self.c_code = Signal(32, name="tap_c_code")
        #: A block's D leaves the last post stage this cycle (to ``o`` if it is ``last``,
        #: and to the feedback register either way); the feedback register.
        self.produced = Signal(name="tap_produced")
        self.feedback = Signal(32, name="tap_feedback")
        #: Each lane's product (a GST unit's: each group's term) this pass, as its aligner
        #: takes it: sign, significand, alignment exponent.
        self.product = [(Signal(name=f"tap_prod{j}_sign"), Signal(40, name=f"tap_prod{j}_sig"),
                         Signal(signed(14), name=f"tap_prod{j}_exp"))
                        for j in range(self.per_pass)]
        #: A GST unit's: each group's products as its group sum's adder tree takes them.
        self.members = [[Signal(signed(40), name=f"tap_g{j}_m{i}") for i in range(spec.group)]
                        for j in range(self.per_pass if grouped else 0)]


def cut(unit_cls: type, taps: Taps, free: str | None = None) -> type:
    """A subclass of ``unit_cls`` that fills ``taps`` (and frees ``free``'s stages). Both
    the plain and the GST stages (``group_exponent_max``, ``group_accumulate``) are cut: a
    unit builds one pair of them."""
    if free not in (None, "terms", "front"):
        raise ValueError(f"free must be None, 'terms' or 'front', not {free!r}")
    block = _tapped_block(unit_cls.block_stage, taps)
    post = _tapped_post(unit_cls.post_pipeline, taps)
    if free == "front":
        exp, acc = _free_exponents(taps), _free_sum(taps)
        return type(f"{unit_cls.__name__}FreeFront", (unit_cls,), {
            "block_stage": block, "post_pipeline": post, "exponent_max": exp,
            "accumulate": acc, "group_exponent_max": exp, "group_accumulate": acc})
    attrs = {"block_stage": block, "post_pipeline": post}
    for acc_name, exp_name in (("accumulate", "exponent_max"),
                               ("group_accumulate", "group_exponent_max")):
        attrs[acc_name] = _tapped_accumulate(getattr(unit_cls, acc_name), taps, free)
        exponents = getattr(unit_cls, exp_name)
        attrs[exp_name] = type(f"{exponents.__name__}Tapped", (exponents,),
                               {"max_tree": _tapped_inputs(exponents.max_tree, taps.max_in)})
    return type(f"{unit_cls.__name__}Cut", (unit_cls,), attrs)


def _tapped_block(base: type, taps: Taps) -> type:
    """``base`` (the block stage) copying the C code its block uses into ``taps``."""
    def elaborate(self, platform):
        m = base.elaborate(self, platform)
        m.d.comb += taps.c_code.eq(self.c_code(self.s0.block, self.post.feedback))
        return m
    return type(f"{base.__name__}Tapped", (base,), {"elaborate": elaborate})


def _tapped_post(base: type, taps: Taps) -> type:
    """``base`` (the post pipeline) telling ``taps`` when a block's D leaves its last stage
    (the flags it hands to ``leaves``, not stalled), and its feedback register."""
    def leaves(self, f):
        self.tapped_flags = f
        return base.leaves(self, f)

    def elaborate(self, platform):
        m = base.elaborate(self, platform)
        m.d.comb += [taps.produced.eq(self.tapped_flags.valid & ~self.status.stall),
                     taps.feedback.eq(self.status.feedback)]
        return m
    return type(f"{base.__name__}Tapped", (base,), {"leaves": leaves, "elaborate": elaborate})


def _tapped_accumulate(base: type, taps: Taps, free: str | None) -> type:
    """``base`` (an accumulate stage) copying its tree's inputs and its pass signals into
    ``taps``, its aligners free where ``free`` is ``"terms"``."""
    attrs = {"adder_tree": _tapped_inputs(base.adder_tree, taps.tree_in),
             "elaborate": _tapped_elaborate(base, taps)}
    if free == "terms":
        attrs.update(aligner=_free_aligner(base.aligner),
                     c_aligner=_free_aligner(base.c_aligner))
    if taps.members and hasattr(base, "group_term"):
        attrs["group_term"] = _tapped_group_term(base.group_term, taps)
    return type(f"{base.__name__}Tapped", (base,), attrs)


def _tapped_group_term(base: type, taps: Taps) -> type:
    """``base`` (a GST group term) whose group sum copies its products (its adder tree's
    inputs) into ``taps.members``: the n-th term made is group ``n mod per_pass``, as the
    accumulate stage makes them, in order, once per elaboration."""
    made = []
    sum_base = base.group_sum

    class TappedGroupSum(sum_base):
        def __init__(self, a_format, b_format, group, *, tap_index):
            super().__init__(a_format, b_format, group)
            self.tap_index = tap_index

        def elaborate(self, platform):
            m = sum_base.elaborate(self, platform)
            adders = m.submodules.adders
            m.d.comb += [t.eq(adders.i[i]) for i, t in enumerate(taps.members[self.tap_index])]
            return m

    def __init__(self, spec):
        base.__init__(self, spec)
        index = len(made) % taps.per_pass
        made.append(index)
        self.group_sum = lambda *args: TappedGroupSum(*args, tap_index=index)

    return type(f"{base.__name__}Tapped", (base,), {"__init__": __init__})


def _tapped_inputs(base: type, signals: list) -> type:
    """``base`` (a tree block with inputs ``i[j]``) copying its inputs into ``signals``."""
    def elaborate(self, platform):
        m = base.elaborate(self, platform)
        m.d.comb += [t.eq(self.i[j]) for j, t in enumerate(signals)]
        return m
    return type(f"Tapped{base.__name__}", (base,), {"elaborate": elaborate})


def _tapped_elaborate(base: type, taps: Taps):
    def elaborate(self, platform):
        m = base.elaborate(self, platform)
        m.d.comb += [taps.go.eq(self.s0.go), taps.done.eq(self.s0.done),
                     taps.p.eq(self.s0.p), taps.first.eq(self.s0.block.first),
                     taps.sum.eq(self.o.sum), taps.e_max.eq(self.exponents.e_max),
                     taps.nan.eq(self.exponents.nan), taps.pinf.eq(self.exponents.pinf),
                     taps.ninf.eq(self.exponents.ninf)]
        grouped = self.spec.group is not None
        for j, (sign, sig, exp) in enumerate(taps.product):
            al = m.submodules[f"galign{j}" if grouped else f"align{j}"]
            m.d.comb += [sign.eq(al.sign), sig.eq(al.sig), exp.eq(al.exp)]
        return m
    return elaborate


def _free_aligner(base: type) -> type:
    """``base`` with its output ``q`` chosen freely each cycle (its ports kept)."""
    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.q.eq(AnySeq(len(self.q)))
        return m
    return type(f"Free{base.__name__}", (base,), {"elaborate": elaborate})


def _free_exponents(taps: Taps) -> type:
    class FreeExponentMax(wiring.Component):
        """The exponent stage's ports, its outputs free each cycle (copied to the taps)."""

        def __init__(self, spec: UnitSpec, microarch: MicroArch):
            super().__init__({"s0": In(s0_signature(spec, microarch)),
                              "o": Out(exponents_signature())})

        def elaborate(self, platform):
            m = Module()
            o = self.o
            m.d.comb += [o.e_max.eq(AnySeq(len(o.e_max)).as_signed()), o.nan.eq(AnySeq(1)),
                         o.pinf.eq(AnySeq(1)), o.ninf.eq(AnySeq(1)),
                         taps.e_max.eq(o.e_max), taps.nan.eq(o.nan), taps.pinf.eq(o.pinf),
                         taps.ninf.eq(o.ninf)]
            return m
    return FreeExponentMax


def _free_sum(taps: Taps) -> type:
    class FreeAccumulate(wiring.Component):
        """The accumulate stage's ports, its sum free each cycle (copied to the taps with
        ``s0``'s pass signals)."""

        def __init__(self, spec: UnitSpec, microarch: MicroArch):
            super().__init__({"s0": In(s0_signature(spec, microarch)),
                              "exponents": In(exponents_signature()),
                              "o": Out(sum_signature(spec))})

        def elaborate(self, platform):
            m = Module()
            m.d.comb += [self.o.sum.eq(AnySeq(len(self.o.sum)).as_signed()),
                         taps.sum.eq(self.o.sum), taps.go.eq(self.s0.go),
                         taps.done.eq(self.s0.done), taps.p.eq(self.s0.p),
                         taps.first.eq(self.s0.block.first)]
            return m
    return FreeAccumulate
