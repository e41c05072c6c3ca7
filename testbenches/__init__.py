"""Verification of the generated RTL against the mxsim model (import testbenches).

One :class:`~testbenches.sim.backend.Backend` protocol runs a unit's RTL on vector sets, cycle by
cycle: the cocotb testbench (:mod:`testbenches.unit.runner`, :mod:`testbenches.unit.mx_dot_tb`), the
bulk C++ harness (:mod:`testbenches.unit.bulk`) and Amaranth's simulator.
:mod:`testbenches.unit.verify`
is ``mxsim verify`` on any of them, with the constrained-random stimulus and functional
coverage of :mod:`testbenches.unit.coverage`; :mod:`testbenches.campaigns.pairs` is the documented
run over
every format pair and :mod:`testbenches.unit.mutants` the mutation test of the testbench itself.
Every run's values are checked against the numerics engine and its cycles against
``mxsim.microarch.cycle``; nothing here re-implements arithmetic.

:mod:`testbenches.cli` holds the ``mxsim verify`` and ``mxsim demo`` verbs, registered with the
command through the ``mxsim.verbs`` entry points (``fit --rtl`` reaches the port map and
:func:`~testbenches.foreign.characterise.characterise` through ``mxsim.hooks``): ``mxsim`` never
imports this package.
"""
