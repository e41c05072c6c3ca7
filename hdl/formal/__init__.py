"""Circuits for proofs (``mxsim prove``): the spec's arithmetic drawn a second, plain way, and
the miters that hold the generated RTL (or a user's) equal to it.

- :mod:`.reference`: ``ReferenceDot``, one instruction of a unit spec as a combinational
  circuit built from the spec alone (exact products, each term truncated into the step's
  window, an exact sum at full width, one rounding), sharing nothing with :mod:`hdl.stages`
  and :mod:`hdl.blocks` but the input beat's layout;
- :mod:`.rounding`: its one rounding;
- :mod:`.tree`: ``TreeDot``, the same for a reduction-tree spec (``reduce = "tree"``: exact
  group terms added pairwise, each node rounded once), for proofs of users' RTL
  (``mxsim prove --rtl``); ``dot_reference`` picks the circuit a spec needs;
- :mod:`.miter`: the generated unit against it (one beat), and the stream handshake as
  properties against a scoreboard of its results;
- :mod:`.cuts` and :mod:`.obligations`: the cut points and the three obligations of a
  compositional proof (terms, sum, post, chain), whose composition :mod:`.obligations` states;
- :mod:`.array`: ``ArrayStream``, the handshake contract of an array of units
  (``hdl.array``) as properties, and optionally where each unit's beat and D go.
"""

from .reference import ReferenceDot, reference_problem
from .tree import TreeDot, dot_problem, dot_reference, tree_problem

__all__ = ["ReferenceDot", "reference_problem", "TreeDot", "tree_problem", "dot_problem",
           "dot_reference"]
