"""The self-attention model: heads (Q, K, V, weight), inverse temperature, attention kind.

Pure numpy: this module knows nothing of meshes, files or MPI.  Conventions are those of
``MODEL.md``: the velocity of the measure ``mu`` at ``x`` is

    SA :  X[mu](x) = sum_h w_h P_x( N_h(x) / Z_h(x) )
    USA:  X[mu](x) = sum_h w_h P_x( N_h(x) )

with ``N_h(x) = int exp(beta <Q_h x, K_h y>) V_h y dmu(y)`` and
``Z_h(x) = int exp(beta <Q_h x, K_h y>) dmu(y)``; a single head has weight 1.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .attention import Attention, attention_kind, attention_names

#: A velocity field of a discrete measure: (targets (n, d), source points (m, d), source
#: weights (m,)) -> X (n, d).  The attention field, the prescribed rotation, a layer's velocity
#: and the field the schemes and the particle system call all have this type.
VelocityField = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


class ModelError(ValueError):
    """Invalid model parameters; the message names the offending field."""


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to a misspelt key (ignoring case), else ``""``."""
    lowered = {choice.lower(): choice for choice in choices}
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1)
    return f" (did you mean {lowered[close[0]]!r}?)" if close else ""


def checked_attention(attention: str, name: str = "attention") -> Attention:
    """The registered attention kind (:mod:`meanfield.attention`) called ``attention``.

    Raises
    ------
    ModelError
        ``attention`` names no registered kind (the message names ``name``).
    """
    if not isinstance(attention, str) or attention not in attention_names():
        raise ModelError(f"{name}: must be one of {attention_names()}, got {attention!r}")
    return attention_kind(attention)


def is_normalised_exp(attention: str, name: str = "attention") -> bool:
    """Whether ``attention`` names a kind with the kernel ``exp`` that normalises (softmax, SA)
    rather than one that does not (USA): the exact references' closed forms need ``exp``.

    Raises
    ------
    ModelError
        ``attention`` names no registered kind, or one whose kernel is not ``exp``.
    """
    kind = checked_attention(attention, name)
    if not kind.exponential:
        raise ModelError(f"{name}: {attention!r} attention has a kernel other than exp, which this "
                         "closed form needs")
    return kind.normalised


def positive_number(value: object, name: str) -> float:
    """``value`` as a float if it is a finite number > 0 (not a bool), else a :class:`ModelError`
    naming the field ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value) or value <= 0:
        raise ModelError(f"{name}: must be a finite number > 0, got {value!r}")
    return float(value)


def _as_matrix(value: object, d: int, name: str) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{name}: must be a {d}x{d} matrix of real numbers ({exc})") from None
    if a.shape != (d, d):
        raise ModelError(f"{name}: must be a {d}x{d} matrix, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{name}: entries must be finite")
    return a


@dataclass(frozen=True)
class Head:
    """One attention head: query, key and value matrices and the head's weight."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    weight: float = 1.0

    @property
    def interaction(self) -> np.ndarray:
        """The bilinear form A = Q^T K, so that <Qx, Ky> = <x, A y>."""
        return self.Q.T @ self.K


@dataclass(frozen=True)
class AttentionModel:
    """Self-attention dynamics on the unit sphere S^{d-1} in R^d.

    Parameters
    ----------
    d
        Ambient dimension (tokens live on S^{d-1}); the PDE supports d = 2 and 3.
    beta
        Inverse temperature, > 0.
    attention
        The name of a registered attention kind: ``"softmax"`` (SA), ``"unnormalized"`` (USA)
        or one of one's own (:mod:`meanfield.attention`).
    heads
        One or more heads; their velocities are summed with the heads' weights.
    """

    d: int
    beta: float
    attention: str = "softmax"
    heads: tuple[Head, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not isinstance(self.d, (int, np.integer)) or self.d < 2:
            raise ModelError(f"model.d: must be an integer >= 2, got {self.d!r}")
        if not np.isfinite(self.beta) or self.beta <= 0:
            raise ModelError(f"model.beta: must be a finite number > 0, got {self.beta!r}")
        checked_attention(self.attention, "model.attention")
        if not self.heads:
            eye = np.eye(self.d)
            object.__setattr__(self, "heads", (Head(eye, eye, eye, 1.0),))

    @classmethod
    def build(
        cls,
        d: int,
        beta: float,
        attention: str = "softmax",
        Q: object = None,
        K: object = None,
        V: object = None,
        heads: Sequence[dict] | None = None,
        prefix: str = "model",
    ) -> AttentionModel:
        """Validate raw parameters (lists, arrays, None for identity) and build a model.

        Either give ``Q``, ``K``, ``V`` (a single head, identity where omitted) or ``heads``,
        a list of mappings with keys ``Q``, ``K``, ``V`` and ``weight``.  Error messages name
        the fields under ``prefix`` (``model``, or a layer's ``model.layers[i]``).
        """
        positive_number(beta, f"{prefix}.beta")
        checked_attention(attention, f"{prefix}.attention")
        eye = np.eye(d)

        def head_from(spec: dict, prefix: str) -> Head:
            allowed = ["K", "Q", "V", "weight"]
            unknown = sorted(set(spec) - set(allowed))
            if unknown:
                raise ModelError(f"{prefix}.{unknown[0]}: unknown key{did_you_mean(unknown[0], allowed)}; "
                                 f"allowed: {allowed}")
            mats = {
                k: eye.copy() if spec.get(k) is None else _as_matrix(spec[k], d, f"{prefix}.{k}")
                for k in ("Q", "K", "V")
            }
            weight = spec.get("weight", 1.0)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not np.isfinite(weight):
                raise ModelError(f"{prefix}.weight: must be a finite number, got {weight!r}")
            return Head(mats["Q"], mats["K"], mats["V"], float(weight))

        if heads:
            if any(m is not None for m in (Q, K, V)):
                raise ModelError(f"{prefix}: give either Q, K, V or heads, not both")
            built = tuple(head_from(dict(h), f"{prefix}.heads[{i}]") for i, h in enumerate(heads))
        else:
            built = (head_from({"Q": Q, "K": K, "V": V}, prefix),)
        return cls(d=int(d), beta=float(beta), attention=attention, heads=built)

    @property
    def kind(self) -> Attention:
        """The attention kind: kernel, how N and Z combine, their linearisation."""
        return attention_kind(self.attention)

    @property
    def is_identity(self) -> bool:
        """True for a single head with Q = K = V = I (the rotation-equivariant case)."""
        eye = np.eye(self.d)
        return len(self.heads) == 1 and all(
            np.array_equal(m, eye) for m in (self.heads[0].Q, self.heads[0].K, self.heads[0].V)
        ) and self.heads[0].weight == 1.0

    def lipschitz_bound(self) -> float:
        """A crude bound of the attention field's Lipschitz constant on the sphere.

        ``sum_h |w_h| ||V_h|| (2 + 2 beta ||Q_h^T K_h||)`` for softmax (the projection contributes
        ~2 ||V||, the softmax weights' gradient 2 beta ||A|| ||V||), multiplied by the kind's
        :meth:`~meanfield.attention.Attention.speed_factor` (``exp(beta ||A||)`` for
        unnormalised attention, whose weights are not normalised; spectral norms).
        """
        total = 0.0
        for h in self.heads:
            a = self.beta * np.linalg.norm(h.interaction, 2)
            growth = self.kind.speed_factor(float(a))
            total += abs(h.weight) * np.linalg.norm(h.V, 2) * (2.0 + 2.0 * a) * growth
        return total

    def speed_bound(self) -> float:
        """A bound of the attention field's speed ``|X[mu](x)|`` over every measure and point.

        ``sum_h |w_h| ||V_h||`` times the kind's :meth:`~meanfield.attention.Attention.speed_factor`
        of ``beta ||Q_h^T K_h||``: 1 for softmax (``P_x V`` of a convex combination of unit
        vectors), ``exp(beta ||Q_h^T K_h||)`` for unnormalised attention (spectral norms).
        """
        total = 0.0
        for h in self.heads:
            growth = self.kind.speed_factor(float(self.beta * np.linalg.norm(h.interaction, 2)))
            total += abs(h.weight) * float(np.linalg.norm(h.V, 2)) * growth
        return total

    def to_dict(self) -> dict:
        """Plain-data form (lists), as written in a resolved config."""
        out: dict = {"attention": self.attention, "beta": self.beta}
        if len(self.heads) == 1 and self.heads[0].weight == 1.0:
            h = self.heads[0]
            out.update(Q=h.Q.tolist(), K=h.K.tolist(), V=h.V.tolist())
        else:
            out["heads"] = [
                {"Q": h.Q.tolist(), "K": h.K.tolist(), "V": h.V.tolist(), "weight": h.weight}
                for h in self.heads
            ]
        return out


def project_tangent(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """P_x v = v - <x, v> x, row-wise for arrays of shape (n, d)."""
    return v - np.einsum("ij,ij->i", x, v)[:, None] * x


def rotation_velocity(rate: float, axis: Sequence[float], d: int) -> VelocityField:
    """Prescribed solid-body rotation, a velocity field that ignores the measure.

    ``X(x) = rate * axis x x`` on S^2, ``rate * (-y, x)`` on S^1; returned with the signature
    of a measure's velocity field, ``(targets, sources, weights) -> X``, so the PDE schemes
    and the particle solver can use it in place of the attention field (transport checks).
    """
    unit = np.asarray(axis, float) / np.linalg.norm(axis)

    def velocity(targets: np.ndarray, sources: np.ndarray, weights: np.ndarray) -> np.ndarray:
        if d == 2:
            return rate * np.stack([-targets[:, 1], targets[:, 0]], axis=1)
        return rate * np.cross(unit, targets)

    return velocity
