"""Verification of the generated RTL against the mxsim model (import testbenches).

One :class:`~testbenches.backend.Backend` protocol runs a unit's RTL on vector sets, cycle by
cycle: the cocotb testbench (:mod:`testbenches.runner`, :mod:`testbenches.mx_dot_tb`), the
bulk C++ harness (:mod:`testbenches.bulk`) and Amaranth's simulator. :mod:`testbenches.verify`
is ``mxsim verify`` on any of them, with the constrained-random stimulus and functional
coverage of :mod:`testbenches.coverage`; :mod:`testbenches.campaign` is the documented run over
every format pair and :mod:`testbenches.mutants` the mutation test of the testbench itself.
Every run's values are checked against the numerics engine and its cycles against
``mxsim.cycle``; nothing here re-implements arithmetic.

:mod:`testbenches.cli` holds the ``mxsim verify`` and ``mxsim demo`` verbs, registered with the
command through the ``mxsim.verbs`` entry points (``fit --rtl`` reaches the port map and
:func:`~testbenches.characterise.characterise` through ``mxsim.hooks``): ``mxsim`` never
imports this package.
"""
