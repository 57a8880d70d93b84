"""Observables of one's own (``[[output.observables]]``): named expressions of the density.

An own observable is a name and an expression whose value is a number, built from reductions of a
pointwise expression of the density ``rho`` and the coordinates ``x, y, z`` (the grammar of
:mod:`meanfield.expression`):

* ``integral(f)``: the sum over cells of f (at the cell's centroid, with its cell average of
  rho) times the cell's area, so ``integral(rho)`` is the mass and ``integral(rho * z)`` the
  mean vector's last component of a finite-volume run;
* ``max(f)``, ``min(f)``: the largest and smallest value of f over the cells;

combined by numbers, arithmetic, comparisons and the functions of
:data:`meanfield.expression.FUNCTIONS`, e.g. ``integral(rho * z) / integral(rho)``,
``max(rho) / integral(rho)`` or an order parameter
``sqrt(integral(rho * x)**2 + integral(rho * y)**2)``.  Each own observable is evaluated at the
output times that are multiples of its ``every`` (every output without it) and is ``nan`` at
the others.  The reductions are collective: each rank reduces its cells,
then the ranks combine their numbers, so the values do not depend on the rank count beyond
round-off.

A particle run evaluates the same own observables on its tokens, the empirical measure
``sum_i w_i delta(x_i)``: ``integral(f)`` is ``sum_i w_i f(1, x_i)`` for an ``f`` linear in
``rho`` (``integral(rho * z)`` is the tokens' mean z), and ``max(f)``, ``min(f)`` reduce over the
tokens an ``f`` that does not involve ``rho`` (``max(z)``).  Other own observables (``max(rho)``,
``integral(rho**2)``) have no value on tokens, which carry no pointwise density: a particle
run refuses them before it starts (:meth:`OwnObservables.check_tokens`).

The studies' observables phi (``--observable EXPR`` or ``NAME=EXPR`` of ``response``,
``retrieval`` and ``fit``) are pointwise expressions of the coordinates alone, named by the same
rule: :class:`Observable`, :func:`parse_observable`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .expression import ARITY, CONSTANTS, FUNCTIONS, VARIABLES, ExpressionError, Function, compile_function
from .times import MATCH_TOL, same_time, time_tol

#: The reductions and what they do to the cells' values.
REDUCTIONS = ("integral", "max", "min")
#: The names a pointwise expression may use.
FIELD_NAMES = ("rho", "x", "y", "z")
#: Keys of one ``[[output.observables]]`` table.
KEYS = ("name", "expression", "every")
#: Columns of observables.csv that an own observable may not be named after.
BUILT_IN = re.compile(r"t|wall|dt|mass|energy|order|rho_min|rho_max|atom_count|atom_mass|mean_.*|m2_.*")
#: An own observable's name: a column of observables.csv and a variable of run.nc.
OWN_OBSERVABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


class _Reductions(ast.NodeTransformer):
    """Replaces each reduction call by a placeholder name, compiling its argument."""

    def __init__(self, field: str) -> None:
        self.field = field
        self.parts: list[tuple[str, Function]] = []

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id in REDUCTIONS:
            if len(node.args) != 1 or node.keywords:
                raise ExpressionError(f"{self.field}: {node.func.id} takes one argument, got {ast.unparse(node)!r}")
            self.parts.append((node.func.id, compile_function(ast.unparse(node.args[0]), self.field, FIELD_NAMES)))
            return ast.Name(id=f"_{len(self.parts) - 1}", ctx=ast.Load())
        if isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:  # sqrt(integral(...)): reduce the arguments
            if len(node.args) != ARITY[node.func.id] or node.keywords:
                raise ExpressionError(f"{self.field}: {node.func.id} takes {ARITY[node.func.id]} argument(s), got "
                                      f"{ast.unparse(node)!r}")
            node.args = [self.visit(a) for a in node.args]
            return node
        if isinstance(node.func, ast.Name):
            raise ExpressionError(f"{self.field}: unknown function {node.func.id!r}; allowed: {', '.join(REDUCTIONS)} "
                                  f"and, of their values, {sorted(FUNCTIONS)}")
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in FIELD_NAMES:
            raise ExpressionError(f"{self.field}: {node.id!r} outside {', '.join(f'{r}(...)' for r in REDUCTIONS)}; "
                                  "an observable is a number: reduce the density's expressions over the cells")
        if node.id not in CONSTANTS:
            raise ExpressionError(f"{self.field}: unknown name {node.id!r}; allowed: {', '.join(REDUCTIONS)} of "
                                  f"expressions of {', '.join(FIELD_NAMES)}, and pi, e")
        return node


@dataclass(frozen=True)
class CompiledOwnObservable:
    """One ``[[output.observables]]`` entry, compiled.

    Attributes
    ----------
    name
        Its column in observables.csv and variable in run.nc.
    expression
        The expression's text.
    every
        Model time between its evaluations (``None``: every output).
    """

    name: str
    expression: str
    every: float | None
    parts: tuple[tuple[str, Function], ...]
    combine: Function
    field: str

    @classmethod
    def compile(cls, name: str, expression: str, every: float | None, field: str) -> CompiledOwnObservable:
        """Compile ``expression``; :class:`ExpressionError` naming ``field`` if it is not allowed."""
        try:
            tree = ast.parse(expression, mode="eval")
        except SyntaxError as exc:
            raise ExpressionError(f"{field}: cannot parse {expression!r}: {exc.msg}") from None
        reductions = _Reductions(field)
        outer = reductions.visit(tree)
        if not reductions.parts:
            raise ExpressionError(f"{field}: {expression!r} reduces nothing; use {', '.join(REDUCTIONS)} of an "
                                  f"expression of {', '.join(FIELD_NAMES)}, e.g. 'integral(rho * z)'")
        placeholders = tuple(f"_{i}" for i in range(len(reductions.parts)))
        combine = compile_function(ast.unparse(outer), field, placeholders)
        return cls(name, expression, every, tuple(reductions.parts), combine, field)

    def due(self, t: float) -> bool:
        """Whether output time ``t`` is a multiple of :attr:`every`."""
        if self.every is None:
            return True
        k = round(t / self.every)
        return same_time(k * self.every, t, MATCH_TOL)


class OwnObservables:
    """The own observables of a run, evaluated together (one exchange between ranks per output).

    Parameters
    ----------
    observables
        The compiled own observables (none: :meth:`evaluate` returns an empty row).
    """

    def __init__(self, observables: Sequence[CompiledOwnObservable] = ()) -> None:
        self.observables = tuple(observables)

    @classmethod
    def from_config(cls, entries: Sequence[Mapping[str, Any]], output_times: np.ndarray,
                    section: str = "output.observables") -> OwnObservables:
        """Check and compile ``[[output.observables]]`` tables (:class:`ExpressionError` naming the field)."""
        own_observables: list[CompiledOwnObservable] = []
        for i, entry in enumerate(entries):
            where = f"{section}[{i}]"
            for key in entry:
                if key not in KEYS:
                    raise ExpressionError(f"{where}.{key}: unknown key; allowed: {list(KEYS)}")
            name, expression, every = entry.get("name"), entry.get("expression"), entry.get("every")
            if not isinstance(name, str) or OWN_OBSERVABLE_NAME.fullmatch(name) is None:
                raise ExpressionError(f"{where}.name: must be a name of letters, digits and '_' starting with a "
                                      f"letter, got {name!r}")
            if BUILT_IN.fullmatch(name) or name in [t.name for t in own_observables]:
                raise ExpressionError(f"{where}.name: {name!r} is already a column of observables.csv")
            if not isinstance(expression, str):
                raise ExpressionError(f"{where}.expression: must be a string such as 'integral(rho * z)', "
                                      f"got {expression!r}")
            if every is not None:
                if isinstance(every, bool) or not isinstance(every, (int, float)) or not np.isfinite(every) \
                        or every <= 0:
                    raise ExpressionError(f"{where}.every: must be a model time > 0, got {every!r}")
                _check_every(float(every), output_times, f"{where}.every")
            own_observables.append(CompiledOwnObservable.compile(name, expression,
                                                                 None if every is None else float(every),
                                                                 f"{where}.expression"))
        return cls(own_observables)

    def __len__(self) -> int:
        return len(self.observables)

    def check_tokens(self) -> None:
        """Refuse (:class:`ExpressionError` naming the field) an own observable with no value on tokens:
        an ``integral`` of an expression that is not linear in ``rho``, or a ``max``/``min`` of
        one that involves ``rho`` (module docstring).  Checked on random points of the sphere."""
        points = np.random.default_rng(0).standard_normal((16, 3))
        points /= np.linalg.norm(points, axis=1, keepdims=True)
        coordinates = dict(zip(FIELD_NAMES[1:], points.T))
        for observable in self.observables:
            for reduction, function in observable.parts:
                half, double = (np.broadcast_to(function({"rho": np.full(16, a), **coordinates}), 16)
                                for a in (0.5, 2.0))
                expected = 4.0 * half if reduction == "integral" else half  # linear in rho, or free of it
                with np.errstate(invalid="ignore"):
                    ok = np.allclose(double, expected, rtol=1e-9, atol=0.0, equal_nan=True)
                if not ok:
                    need = "linear in rho, e.g. integral(rho * z)" if reduction == "integral" else \
                        "without rho, e.g. max(z)"
                    raise ExpressionError(f"{observable.field}: {observable.expression!r} has no value on tokens, "
                                          f"which carry no pointwise density; a particle run takes {reduction}(...) "
                                          f"of an expression {need}")

    def evaluate(self, t: float, rho: np.ndarray, points: np.ndarray, areas: np.ndarray, comm) -> dict[str, float]:
        """The own observables' values at output time ``t`` (collective; ``nan`` for those not due).

        Parameters
        ----------
        rho, points, areas
            This rank's cells: cell averages (n,), centroids (n, d), areas (n,); or its tokens:
            ones, positions, weights.
        comm
            The communicator whose ranks hold the other cells (``None``: serial).
        """
        due = [observable for observable in self.observables if observable.due(t)]
        if not due:
            return {observable.name: float("nan") for observable in self.observables}
        env = {"rho": rho, **{v: points[:, i] if i < points.shape[1] else np.zeros(len(rho))
                              for i, v in enumerate(FIELD_NAMES[1:])}}
        parts = [part for observable in due for part in observable.parts]
        local = np.array([_REDUCE[reduction](np.broadcast_to(function(env), rho.shape), areas)
                          for reduction, function in parts])
        gathered = np.stack(comm.allgather(local)) if comm is not None and comm.size > 1 else local[None]
        reduced = [_COMBINE[reduction](gathered[:, j]) for j, (reduction, _) in enumerate(parts)]
        out = {observable.name: float("nan") for observable in self.observables}
        k = 0
        for observable in due:
            n = len(observable.parts)
            env_reduced = {f"_{i}": reduced[k + i] for i in range(n)}
            out[observable.name] = float(observable.combine(env_reduced))
            k += n
        return out


#: Each reduction on one rank's cells (values, areas) -> number, and over the ranks' numbers.
_REDUCE: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "integral": lambda values, areas: float(values @ areas),
    "max": lambda values, areas: float(np.max(values, initial=-np.inf)),
    "min": lambda values, areas: float(np.min(values, initial=np.inf)),
}
_COMBINE: dict[str, Callable[[np.ndarray], float]] = {
    "integral": lambda v: float(v.sum()), "max": lambda v: float(v.max()), "min": lambda v: float(v.min())}


def _check_every(every: float, output_times: np.ndarray, field: str) -> None:
    """Every multiple of ``every`` up to the last output time must be an output time."""
    count = int(np.floor(float(output_times[-1]) / every * (1 + MATCH_TOL))) + 1
    if count > len(output_times):
        raise ExpressionError(f"{field}: {every:g} is shorter than the output spacing ({count} multiples up to "
                              f"t_final, {len(output_times)} output times)")
    for t in every * np.arange(count):
        if np.min(np.abs(output_times - t)) > time_tol(t, MATCH_TOL):
            raise ExpressionError(f"{field}: {every:g} is not a multiple of the output spacing: t = {t:g} is not an "
                                  "output time (time.outputs)")


@dataclass(frozen=True)
class Observable:
    """An observable ``phi``: its label (NAME, or the expression as given) and compiled expression."""

    label: str
    expression: str
    function: Function

    def __call__(self, points: np.ndarray) -> np.ndarray:
        env = {v: points[:, i] if i < points.shape[1] else np.zeros(len(points)) for i, v in enumerate(VARIABLES)}
        return np.broadcast_to(np.asarray(self.function(env), dtype=float), (len(points),)).copy()


def parse_observable(text: str) -> Observable:
    """``EXPR`` or ``NAME=EXPR`` -> :class:`Observable` (``ExpressionError`` naming ``--observable``)."""
    name, sep, rest = text.partition("=")
    named = bool(sep) and OWN_OBSERVABLE_NAME.fullmatch(name.strip()) is not None and not rest.startswith("=")
    label, expression = (name.strip(), rest.strip()) if named else (text, text)
    return Observable(label, expression, compile_function(expression, f"--observable {text!r}", VARIABLES))
