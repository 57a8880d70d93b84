"""Safe evaluation of density expressions in Cartesian coordinates, e.g. ``1 + 0.5*z``.

The expression is parsed with :mod:`ast` and only numbers, the names ``x, y, z, pi, e`` (and
the token position ``s`` of a causal run, see :class:`meanfield.masks.Causal`),
arithmetic operators, comparisons and a fixed set of numpy functions (with their number of
arguments checked) are allowed; nothing is passed to ``eval``.  Arithmetic is numpy's
float64: a division by zero or an overflow gives ``inf`` or ``nan`` (refused later as a
density value that is not finite), never a Python exception.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping

import numpy as np

#: Allowed functions and their number of arguments.
ARITY: dict[str, int] = {
    **{name: 1 for name in ("exp", "log", "sqrt", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
                            "sinh", "cosh", "tanh", "abs")},
    "arctan2": 2, "maximum": 2, "minimum": 2, "where": 3,
}
FUNCTIONS: dict[str, Callable] = {name: getattr(np, name) for name in ARITY}
CONSTANTS = {"pi": np.pi, "e": np.e}
VARIABLES = ("x", "y", "z")
#: The token position in [0, 1]: a variable of the initial density of a causal run.
POSITION = "s"
_BINARY: dict[type, Callable] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow}
_UNARY: dict[type, Callable] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_COMPARE: dict[type, Callable] = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
#: Deepest syntax tree an expression may have (a sum of k terms nests about k levels deep): the
#: checker and the evaluator recurse once per level, well within Python's default limit of 1000.
MAX_DEPTH = 200
#: A compiled expression: values of its names (arrays broadcast together, or numbers) -> values.
Function = Callable[[Mapping[str, "np.ndarray | float"]], np.ndarray]


class ExpressionError(ValueError):
    """An expression that is not allowed or does not parse."""


def _depth(tree: ast.AST) -> int:
    """Depth of the syntax tree, measured without recursion."""
    deepest, stack = 0, [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _shown(text: str, limit: int = 80) -> str:
    """``text`` quoted for a one-line message, shortened when long."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def compile_expression(text: str, field: str = "initial.expression") -> Callable[[np.ndarray], np.ndarray]:
    """Turn ``text`` into a function of points (n, d) -> values (n,).

    Raises :class:`ExpressionError` naming ``field`` for anything outside the allowed grammar.
    """
    function = compile_function(text, field, VARIABLES)
    return lambda points: _at_points(function, points, {})


def compile_positional_expression(text: str, field: str = "initial.expression"
                                  ) -> Callable[[np.ndarray, float | np.ndarray], np.ndarray]:
    """Turn ``text``, an expression in ``x, y, z`` and the position ``s``, into a function of
    points (n, d) and s (one position, or one per point) -> values (n,) (:func:`uses_position`
    says whether it names s).

    Raises :class:`ExpressionError` naming ``field`` for anything outside the allowed grammar.
    """
    function = compile_function(text, field, (*VARIABLES, POSITION))
    return lambda points, s: _at_points(function, points, {POSITION: np.asarray(s, dtype=float)})


def uses_position(text: str) -> bool:
    """Whether ``text`` (an expression that parses) names the position ``s``."""
    return any(isinstance(node, ast.Name) and node.id == POSITION for node in ast.walk(ast.parse(text, mode="eval")))


def _at_points(function: Function, points: np.ndarray, extra: Mapping[str, float | np.ndarray]) -> np.ndarray:
    """``function`` at points (n, d) (coordinates beyond d are 0) with the ``extra`` names' values."""
    env: dict[str, np.ndarray | float] = {
        v: points[:, i] if i < points.shape[1] else np.zeros(len(points)) for i, v in enumerate(VARIABLES)}
    env.update(extra)
    return np.broadcast_to(function(env), (len(points),)).copy()


def compile_function(text: str, field: str, names: tuple[str, ...]) -> Function:
    """Turn ``text`` into a function of named arrays (``names``, broadcast together) -> float64 values.

    Raises :class:`ExpressionError` naming ``field`` for anything outside the allowed grammar
    (numbers, ``names``, ``pi``, ``e``, the operators and :data:`FUNCTIONS`).
    """
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{field}: cannot parse {_shown(text)}: {exc.msg}") from None
    except (RecursionError, MemoryError):  # the parser's own nesting limit (a chain of ~ 10^4 operators)
        raise ExpressionError(f"{field}: nests too deeply to parse ({len(text)} characters); at most "
                              f"{MAX_DEPTH} levels allowed") from None
    depth = _depth(tree)
    if depth > MAX_DEPTH:
        raise ExpressionError(f"{field}: nests {depth} levels deep, at most {MAX_DEPTH} allowed (a sum of k terms "
                              "nests about k levels deep); write it with fewer terms")

    def check(node: ast.AST) -> None:
        if isinstance(node, ast.Expression):
            check(node.body)
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)) or isinstance(node.value, bool):
                raise ExpressionError(f"{field}: only numbers are allowed as constants, got {node.value!r}")
        elif isinstance(node, ast.Name):
            if node.id not in names and node.id not in CONSTANTS:
                raise ExpressionError(f"{field}: unknown name {node.id!r}; allowed: {', '.join(names)}, pi, e")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            check(node.left)
            check(node.right)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            check(node.operand)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            check(node.left)
            check(node.comparators[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
            if node.keywords:
                raise ExpressionError(f"{field}: keyword arguments are not allowed")
            if len(node.args) != ARITY[node.func.id]:
                raise ExpressionError(f"{field}: {node.func.id} takes {ARITY[node.func.id]} argument(s), "
                                      f"got {len(node.args)} in {ast.unparse(node)!r}")
            for a in node.args:
                check(a)
        else:
            raise ExpressionError(
                f"{field}: {ast.unparse(node)!r} is not allowed; use numbers, {', '.join(names)}, pi, e, "
                f"+ - * / **, comparisons and {sorted(FUNCTIONS)}"
            )

    check(tree)

    def evaluate(node: ast.AST, env: Mapping) -> np.ndarray | float:
        if isinstance(node, ast.Expression):
            return evaluate(node.body, env)
        if isinstance(node, ast.Constant):
            return np.float64(node.value)  # type: ignore[arg-type]  # numbers only (checked); 1/0 is inf
        if isinstance(node, ast.Name):
            return env[node.id] if node.id in env else CONSTANTS[node.id]
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](evaluate(node.left, env), evaluate(node.right, env))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](evaluate(node.operand, env))
        if isinstance(node, ast.Compare):
            compare = _COMPARE[type(node.ops[0])]
            return np.asarray(compare(evaluate(node.left, env), evaluate(node.comparators[0], env)), dtype=float)
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        function: Callable = FUNCTIONS[node.func.id]
        return function(*(evaluate(a, env) for a in node.args))

    def function(env: Mapping[str, np.ndarray | float]) -> np.ndarray:
        try:
            with np.errstate(all="ignore"):
                values = evaluate(tree, env)
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise ExpressionError(f"{field}: cannot evaluate {_shown(text)}: {exc}") from None
        return np.asarray(values, dtype=float)

    return function
