"""Safe evaluation of density expressions in Cartesian coordinates, e.g. ``1 + 0.5*z``.

The expression is parsed with :mod:`ast` and only numbers, the names ``x, y, z, pi, e``,
arithmetic operators and a fixed set of numpy functions are allowed; nothing is passed to
``eval``.
"""

from __future__ import annotations

import ast
import operator
from typing import Callable

import numpy as np

FUNCTIONS: dict[str, Callable] = {
    name: getattr(np, name)
    for name in ("exp", "log", "sqrt", "sin", "cos", "tan", "arctan2", "arcsin", "arccos",
                 "arctan", "sinh", "cosh", "tanh", "abs", "maximum", "minimum", "where")
}
CONSTANTS = {"pi": np.pi, "e": np.e}
VARIABLES = ("x", "y", "z")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}


class ExpressionError(ValueError):
    """An expression that is not allowed or does not parse."""


def compile_expression(text: str, field: str = "initial.expression") -> Callable[[np.ndarray], np.ndarray]:
    """Turn ``text`` into a function of points (n, d) -> values (n,).

    Raises :class:`ExpressionError` naming ``field`` for anything outside the allowed grammar.
    """
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{field}: cannot parse {text!r}: {exc.msg}") from None

    def check(node: ast.AST) -> None:
        if isinstance(node, ast.Expression):
            check(node.body)
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)) or isinstance(node.value, bool):
                raise ExpressionError(f"{field}: only numbers are allowed as constants, got {node.value!r}")
        elif isinstance(node, ast.Name):
            if node.id not in VARIABLES and node.id not in CONSTANTS:
                raise ExpressionError(f"{field}: unknown name {node.id!r}; allowed: x, y, z, pi, e")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            check(node.left), check(node.right)
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            check(node.operand)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            check(node.left), check(node.comparators[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
            if node.keywords:
                raise ExpressionError(f"{field}: keyword arguments are not allowed")
            for a in node.args:
                check(a)
        else:
            raise ExpressionError(
                f"{field}: {ast.unparse(node)!r} is not allowed; use numbers, x, y, z, pi, e, "
                f"+ - * / **, comparisons and {sorted(FUNCTIONS)}"
            )

    check(tree)

    def evaluate(node: ast.AST, env: dict) -> np.ndarray | float:
        if isinstance(node, ast.Expression):
            return evaluate(node.body, env)
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return env[node.id] if node.id in env else CONSTANTS[node.id]
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](evaluate(node.left, env), evaluate(node.right, env))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](evaluate(node.operand, env))
        if isinstance(node, ast.Compare):
            return np.asarray(_COMPARE[type(node.ops[0])](evaluate(node.left, env), evaluate(node.comparators[0], env)), dtype=float)
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        return FUNCTIONS[node.func.id](*(evaluate(a, env) for a in node.args))

    def density(points: np.ndarray) -> np.ndarray:
        env = {v: points[:, i] if i < points.shape[1] else np.zeros(len(points)) for i, v in enumerate(VARIABLES)}
        with np.errstate(all="ignore"):
            values = evaluate(tree, env)
        return np.broadcast_to(np.asarray(values, dtype=float), (len(points),)).copy()

    return density
