"""Waivers: known deviations of a design, named by a predicate over a mismatch, counted apart.

A waiver is a name and a ``when`` predicate, written in a small expression language that is
parsed with :mod:`ast` and checked before anything is simulated. Only these are allowed:

- names from a fixed vocabulary (:data:`VOCABULARY`): ``want``, ``got`` and ``c`` (the model's
  result, the design's result and the dot product's C), each only with an attribute among
  ``.zero .neg_zero .pos_zero .nan .inf .neg .finite`` (true or false) and ``.code`` (the
  code, an integer); ``ulp`` (how many codes of the result format lie between want and got,
  both finite; for a fixed-point result, the value difference in units of its LSB at want,
  rounded up); ``sign_only`` (want and got differ in the sign alone); ``a_format`` and
  ``b_format`` (strings); ``missing`` (a result that never came), ``flags`` (a ``[status]``
  flags mismatch), ``cycle`` (a timing mismatch) and ``rule`` (a timing mismatch's rule, a
  string such as ``"rule 3"`` or ``"input handshake"``);
- ``and``, ``or``, ``not``, parentheses;
- comparisons ``== != < <= > >=`` (chained too) between integers, and ``== !=`` between
  strings or between tests;
- integer constants (``0x80000000``, ``-1``) and string constants.

Nothing else: no calls, no arithmetic, no subscripts, no other names. A comparison with an
integer that is undefined for a mismatch (``ulp`` where want or got is not finite, ``got.code``
of a fixed-point result, any code of a missing result or a timing mismatch) is false.

A predicate is evaluated on every mismatch of a run (numpy, all at once). A mismatch of a
value is waived by the first waiver (in the order given) whose predicate is true for it. A
missing result, a flags mismatch and a timing mismatch are waived only by a predicate that
names ``missing``, ``flags``, or ``cycle``/``rule`` respectively: a waiver about values never
hides anything else.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from mxsim.errors import MxsimError

__all__ = ["Waiver", "WaiverError", "compile_when", "parse_option", "VOCABULARY", "ATTRIBUTES",
           "OPERANDS", "Num", "evaluate"]

_BOOL, _INT, _STR = "a test", "an integer", "a string"
#: The operands of a mismatch, each read through one of :data:`ATTRIBUTES`.
OPERANDS = frozenset({"want", "got", "c"})
#: An operand's attributes and their types.
ATTRIBUTES = {"zero": _BOOL, "neg_zero": _BOOL, "pos_zero": _BOOL, "nan": _BOOL, "inf": _BOOL,
              "neg": _BOOL, "finite": _BOOL, "code": _INT}
#: The other names a predicate may use, and their types.
VOCABULARY = {"ulp": _INT, "sign_only": _BOOL, "a_format": _STR, "b_format": _STR,
              "missing": _BOOL, "flags": _BOOL, "cycle": _BOOL, "rule": _STR}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
_HELP = (f"a waiver may name want, got and c (each with .{' .'.join(ATTRIBUTES)}), "
         f"{', '.join(VOCABULARY)}")
_PLURAL = {_BOOL: "tests", _INT: "integers", _STR: "strings"}


class WaiverError(MxsimError):
    """A malformed waiver (the message is one line; the caller prefixes where it was given)."""


@dataclass(frozen=True)
class Num:
    """Integers with a mask of where they are defined: a comparison is false elsewhere."""
    values: Any
    defined: Any = True


@dataclass(frozen=True)
class Waiver:
    """One known deviation: ``name``, the predicate ``when`` (compiled by
    :func:`compile_when`), where it was given (``source``: ``MAP.toml:LINE`` or ``--waive
    N``) and, for a command-line waiver, its ``--waive`` text (replay lines repeat it)."""
    name: str
    when: str
    source: str
    option: str | None = None
    tree: ast.Expression = field(default=None, compare=False, repr=False)
    uses: frozenset[str] = frozenset()

    @classmethod
    def of(cls, name: str, when: str, source: str, option: str | None = None) -> Waiver:
        """The waiver, its predicate checked (WaiverError naming ``source``)."""
        try:
            tree, uses = compile_when(when)
        except WaiverError as exc:
            raise WaiverError(f"{source}: {exc}") from None
        return cls(name, when, source, option, tree, uses)

    def applies(self, kind: str) -> bool:
        """Whether this waiver may waive a mismatch of ``kind`` (value, flags, missing,
        cycle): values always, the others only when the predicate names them."""
        return kind == "value" or {"flags": {"flags"}, "missing": {"missing"},
                                   "cycle": {"cycle", "rule"}}[kind] & self.uses != set()

    def matches(self, env: Mapping[str, Any], n: int) -> npt.NDArray[np.bool_]:
        """The predicate on ``n`` mismatches whose vocabulary is ``env``."""
        return evaluate(self.tree, env, n)

    def to_dict(self) -> dict:
        return {"name": self.name, "when": self.when, "source": self.source}


def parse_option(text: str, index: int) -> Waiver:
    """The waiver of the ``index``-th (1-based) ``--waive [NAME:]WHEN`` option: the name is
    the text before its last colon (none: the predicate names itself)."""
    source = f"--waive {index} ({text!r})"
    name, colon, when = text.rpartition(":")
    if not colon:
        name, when = text.strip(), text
    if not name.strip() or not when.strip():
        raise WaiverError(f"{source}: give --waive 'NAME: WHEN' or --waive 'WHEN', e.g. "
                          f"--waive 'exact-zero result, C = -0: want.zero and got.zero and "
                          f"c.neg_zero'")
    return Waiver.of(name.strip(), when.strip(), source, option=text)


def compile_when(text: str) -> tuple[ast.Expression, frozenset[str]]:
    """The checked syntax tree of a predicate and the names it uses (see the module
    docstring); WaiverError (one line) for anything outside the language."""
    if not isinstance(text, str) or not text.strip():
        raise WaiverError("the predicate is empty; write one, e.g. want.zero and got.zero")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise WaiverError(f"syntax error in {text.strip()!r} at column {exc.offset}: "
                          f"{exc.msg}") from None
    uses: set[str] = set()
    kind = _check(tree.body, uses)
    if kind != _BOOL:
        raise WaiverError(f"{text.strip()!r} is {kind}, not a test; compare it, e.g. ulp <= 1")
    return tree, frozenset(uses)


def _check(node: ast.AST, uses: set[str]) -> str:
    """The type of ``node``, every part of it allowed (WaiverError otherwise)."""
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _need(value, _BOOL, uses, "and/or")
        return _BOOL
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _need(node.operand, _BOOL, uses, "not")
        return _BOOL
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(
            node.operand, ast.Constant) and type(node.operand.value) is int:
        return _INT
    if isinstance(node, ast.Compare):
        kinds = [_check(x, uses) for x in (node.left, *node.comparators)]
        pairs = zip(kinds[:-1], kinds[1:], strict=True)
        for (left, right), op in zip(pairs, node.ops, strict=True):
            if type(op) not in _COMPARE:
                raise WaiverError(f"'{type(op).__name__}' is not a comparison a waiver takes; "
                                  f"use == != < <= > >=")
            if left != right:
                raise WaiverError(f"cannot compare {left} with {right}")
            if left != _INT and type(op) not in (ast.Eq, ast.NotEq):
                raise WaiverError(f"{_PLURAL[left]} compare with == and != only")
        return _BOOL
    if isinstance(node, ast.Name):
        if node.id in OPERANDS:
            raise WaiverError(f"{node.id} needs an attribute: {node.id}.zero, "
                              f"{node.id}.code, ... ({', '.join(ATTRIBUTES)})")
        if node.id not in VOCABULARY:
            raise WaiverError(f"unknown name {node.id!r}; {_HELP}")
        uses.add(node.id)
        return VOCABULARY[node.id]
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id not in OPERANDS | VOCABULARY.keys():
            raise WaiverError(f"unknown name {node.value.id!r}; {_HELP}")
        if not (isinstance(node.value, ast.Name) and node.value.id in OPERANDS):
            raise WaiverError(f"only want, got and c have attributes, not "
                              f"{ast.unparse(node.value)!r}; {_HELP}")
        if node.attr not in ATTRIBUTES:
            raise WaiverError(f"unknown attribute {node.value.id}.{node.attr}; "
                              f"{node.value.id} has {', '.join(ATTRIBUTES)}")
        uses.add(node.value.id)
        return ATTRIBUTES[node.attr]
    if isinstance(node, ast.Constant) and type(node.value) in (int, str):
        return _INT if type(node.value) is int else _STR
    if isinstance(node, ast.Call):
        raise WaiverError(f"calls are not allowed ({ast.unparse(node)!r}); {_HELP}")
    raise WaiverError(f"{ast.unparse(node)!r} is not allowed: a waiver is names, attributes, "
                      f"and/or/not, comparisons and integer or string constants")


def _need(node: ast.AST, kind: str, uses: set[str], what: str) -> None:
    got = _check(node, uses)
    if got != kind:
        raise WaiverError(f"{what} takes tests, not {got} ({ast.unparse(node)!r}); compare "
                          f"it, e.g. ulp <= 1")


def evaluate(tree: ast.Expression, env: Mapping[str, Any], n: int) -> npt.NDArray[np.bool_]:
    """A checked predicate on ``n`` mismatches: ``env`` maps each name to an array of ``n``
    (or one value for all): tests as bools, integers as :class:`Num`, strings as str; an
    operand to a mapping of its attributes."""
    out = _eval(tree.body, env)
    return np.broadcast_to(np.asarray(out, bool), (n,)).copy()


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.BoolOp):
        parts = [np.asarray(_eval(v, env), bool) for v in node.values]
        join = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        out = parts[0]
        for p in parts[1:]:
            out = join(out, p)
        return out
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.Not):
            return np.logical_not(_eval(node.operand, env))
        return Num(-node.operand.value)
    if isinstance(node, ast.Compare):
        values = [_eval(x, env) for x in (node.left, *node.comparators)]
        out: Any = True
        pairs = zip(values[:-1], values[1:], strict=True)
        for (left, right), op in zip(pairs, node.ops, strict=True):
            out = np.logical_and(out, _compare(left, right, _COMPARE[type(op)]))
        return out
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Attribute):
        return env[node.value.id][node.attr]
    value = node.value                                   # a checked constant
    return Num(value) if type(value) is int else value


def _compare(left: Any, right: Any, op) -> Any:
    if isinstance(left, Num):
        # A constant beyond int64 compares as Python integers (codes are below 2**32).
        big = any(isinstance(x.values, int) and not -(1 << 63) <= x.values < (1 << 63)
                  for x in (left, right))
        kind = object if big else None
        return np.logical_and(np.logical_and(left.defined, right.defined),
                              op(np.asarray(left.values, kind), np.asarray(right.values, kind)))
    return op(np.asarray(left), np.asarray(right))
