"""The complete transformer layer (attention + feed-forward block) and layer schedules.

Pure numpy (and scipy.special, imported where the GELU is evaluated): nothing here knows of meshes, files or MPI.

Feed-forward block (MODEL.md)
    ``F(x) = P_x( W sigma(A x + b) )`` with ``W`` (d x m), ``A`` (m x d), ``b`` (m) and
    ``sigma`` applied entrywise: ``relu``, ``tanh``, ``gelu`` (the exact one,
    ``z Phi(z)`` with ``Phi`` the standard normal CDF) or ``identity``.  F is a local
    velocity: a layer's velocity is its attention velocity ``X[mu]`` (none when the layer's
    ``attention`` is ``"none"``) plus ``F``.  Its surface divergence, needed for exact
    push-forward solutions, is analytic (:meth:`FeedForward.divergence`).

Layer schedules
    Depth is time: layer k holds one attention model and one feed-forward block on
    ``[t_{k-1}, t_k)`` (``t_0 = 0``).  A schedule is built from a ``[model]`` table: its keys
    (``attention``, ``beta``, ``Q``, ``K``, ``V``, ``heads``, ``ffn``) are the defaults, and
    each ``[[model.layers]]`` table gives its ``t_end`` and the keys that change from that
    layer on; later layers inherit them.  ``heads`` and ``Q``/``K``/``V`` are alternatives: a
    layer that gives one drops the other's inherited value.  A layer's ``ffn`` table replaces
    the inherited one as a whole.  Without ``[[model.layers]]`` the ``[model]`` keys hold for
    all times.

    Consecutive layers with equal parameters are merged (their boundary changes nothing, so
    the solvers do not stop there), and the last layer holds on ``[t_{L-1}, inf)``: the
    config checks that the last ``t_end`` is at least ``time.t_final``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .attention import attention_names
from .model import AttentionModel, ModelError, did_you_mean, positive_number, project_tangent
from .times import time_tol

#: Activations of the feed-forward block.
ACTIVATIONS: tuple[str, ...] = ("relu", "tanh", "gelu", "identity")
#: Keys of a ``[model.ffn]`` table.
FFN_KEYS: tuple[str, ...] = ("W", "A", "b", "activation")
#: Model keys a layer may change.
LAYER_MODEL_KEYS: tuple[str, ...] = ("attention", "beta", "Q", "K", "V", "heads", "ffn")
#: Keys of a ``[[model.layers]]`` table.
LAYER_KEYS: tuple[str, ...] = ("t_end", *LAYER_MODEL_KEYS)

_SQRT_2PI = float(np.sqrt(2.0 * np.pi))


def _relu_derivative(z: np.ndarray) -> np.ndarray:
    return (z > 0).astype(float)


def _tanh_derivative(z: np.ndarray) -> np.ndarray:
    return 1.0 / np.cosh(z) ** 2


def _gelu(z: np.ndarray) -> np.ndarray:
    from scipy import special  # here: the config imports this module, and scipy.special is heavy

    return z * special.ndtr(z)


def _gelu_derivative(z: np.ndarray) -> np.ndarray:
    from scipy import special

    return special.ndtr(z) + z * np.exp(-0.5 * z * z) / _SQRT_2PI


#: name -> (sigma, sigma', sup |sigma'|)
_ACTIVATION_FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray],
                                       float]] = {
    "relu": (lambda z: np.maximum(z, 0.0), _relu_derivative, 1.0),
    "tanh": (np.tanh, _tanh_derivative, 1.0),
    # GELU's slope is largest at z = sqrt 2: Phi(sqrt 2) + sqrt 2 phi(sqrt 2)
    "gelu": (_gelu, _gelu_derivative, 0.5 * (1.0 + math.erf(1.0)) + math.sqrt(2.0) * math.exp(-1.0) / _SQRT_2PI),
    "identity": (lambda z: z, np.ones_like, 1.0),
}


def _real_array(value: object, name: str, what: str) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{name}: must be {what} of real numbers, got {value!r}") from None
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{name}: entries must be finite")
    return a


@dataclass(frozen=True)
class FeedForward:
    """The feed-forward (perceptron) block ``F(x) = P_x(W sigma(A x + b))``.

    Attributes
    ----------
    W
        (d, m) output weights.
    A
        (m, d) input weights.
    b
        (m,) biases.
    activation
        One of :data:`ACTIVATIONS`.
    """

    W: np.ndarray
    A: np.ndarray
    b: np.ndarray
    activation: str

    @classmethod
    def build(cls, d: int, spec: object, prefix: str = "model.ffn") -> FeedForward:
        """Validate a raw ``[model.ffn]`` table (lists or arrays) and build the block.

        ``W`` and ``A`` are required; ``b`` defaults to zeros and ``activation`` to ``"relu"``.
        Errors name the field under ``prefix``.
        """
        if not isinstance(spec, Mapping):
            raise ModelError(f"{prefix}: must be a table with keys {list(FFN_KEYS)}, got {spec!r}")
        for key in spec:
            if key not in FFN_KEYS:
                raise ModelError(f"{prefix}.{key}: unknown key{did_you_mean(str(key), FFN_KEYS)}; "
                                 f"allowed: {list(FFN_KEYS)}")
        for key in ("W", "A"):
            if spec.get(key) is None:
                raise ModelError(f"{prefix}.{key}: required")
        W = _real_array(spec["W"], f"{prefix}.W", "a d x m matrix")
        if W.ndim != 2 or W.shape[0] != d or W.shape[1] < 1:
            raise ModelError(f"{prefix}.W: must be a {d} x m matrix (d = {d} rows, m >= 1 columns), "
                             f"got shape {W.shape}")
        m = W.shape[1]
        A = _real_array(spec["A"], f"{prefix}.A", "an m x d matrix")
        if A.shape != (m, d):
            raise ModelError(f"{prefix}.A: must be a {m} x {d} matrix (m = {m} from {prefix}.W), got shape {A.shape}")
        b = np.zeros(m) if spec.get("b") is None else _real_array(spec["b"], f"{prefix}.b", "a vector")
        if b.shape != (m,):
            raise ModelError(f"{prefix}.b: must be a vector of length {m} (m from {prefix}.W), got shape {b.shape}")
        activation = spec.get("activation", "relu")
        if activation not in ACTIVATIONS:
            hint = did_you_mean(activation, ACTIVATIONS) if isinstance(activation, str) else ""
            raise ModelError(f"{prefix}.activation: must be one of {list(ACTIVATIONS)}, got {activation!r}{hint}")
        return cls(W, A, b, activation)

    @property
    def d(self) -> int:
        return self.W.shape[0]

    @property
    def width(self) -> int:
        """The hidden width m."""
        return self.W.shape[1]

    def _preactivation(self, x: np.ndarray) -> np.ndarray:
        return x @ self.A.T + self.b

    def velocity(self, x: np.ndarray) -> np.ndarray:
        """``F(x) = P_x(W sigma(A x + b))`` row-wise, x of shape (n, d) on the sphere."""
        sigma = _ACTIVATION_FUNCTIONS[self.activation][0]
        return project_tangent(x, sigma(self._preactivation(x)) @ self.W.T)

    def divergence(self, x: np.ndarray) -> np.ndarray:
        """Surface divergence ``div_S F`` at points x (n, d) of the unit sphere.

        With ``G(x) = W sigma(A x + b)`` and ``DG = W diag(sigma'(A x + b)) A``, the tangential
        field ``F = G - <x, G> x`` has ``div_S F = tr(P DF) = tr DG - x^T DG x - (d - 1) <x, G>``
        (``P = I - x x^T``, ``P x = 0`` and ``tr P = d - 1`` on the sphere).
        """
        sigma, derivative, _ = _ACTIVATION_FUNCTIONS[self.activation]
        z = self._preactivation(x)
        s, ds = sigma(z), derivative(z)
        trace = ds @ np.einsum("kj,jk->k", self.A, self.W)  # sum_k sigma'_k (A W)_kk
        xWx = ds * (x @ self.W) * (x @ self.A.T)  # sigma'_k <x, W e_k> <A_k, x>
        return trace - xWx.sum(axis=1) - (self.d - 1) * np.einsum("ij,ij->i", x, s @ self.W.T)

    def lipschitz_bound(self) -> float:
        """A crude bound of F's Lipschitz constant on the sphere.

        ``|DF| <= 2 |DG| + 2 |G|`` with ``|DG| <= ||W|| s ||A||`` (``s = sup |sigma'|``) and
        ``|G| <= ||W|| (||A|| + |b|)`` (every activation has ``|sigma(z)| <= |z|``).
        """
        slope = _ACTIVATION_FUNCTIONS[self.activation][2]
        w, a = np.linalg.norm(self.W, 2), np.linalg.norm(self.A, 2)
        return float(2.0 * w * (slope * a + a + np.linalg.norm(self.b)))

    def speed_bound(self) -> float:
        """A bound of ``|F(x)|`` on the sphere: ``||W|| (||A|| + |b|)`` (``|sigma(z)| <= |z|``)."""
        return float(np.linalg.norm(self.W, 2) * (np.linalg.norm(self.A, 2) + np.linalg.norm(self.b)))

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (lists), as written in a config."""
        return {"W": self.W.tolist(), "A": self.A.tolist(), "b": self.b.tolist(), "activation": self.activation}


@dataclass(frozen=True)
class Layer:
    """One layer's parameters: an attention model (``None``: no attention) and a feed-forward block.

    Attributes
    ----------
    attention
        The attention model, or ``None`` for ``attention = "none"``.
    ffn
        The feed-forward block, or ``None``.
    """

    attention: AttentionModel | None
    ffn: FeedForward | None

    def lipschitz_bound(self) -> float:
        """A crude bound of the layer's velocity's Lipschitz constant: attention's plus the block's."""
        attention = 0.0 if self.attention is None else self.attention.lipschitz_bound()
        return attention + (0.0 if self.ffn is None else self.ffn.lipschitz_bound())

    def speed_bound(self) -> float:
        """A bound of the layer's speed on the sphere: attention's plus the block's."""
        attention = 0.0 if self.attention is None else self.attention.speed_bound()
        return attention + (0.0 if self.ffn is None else self.ffn.speed_bound())

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form: ``{"attention": model dict or None, "ffn": block dict or None}``."""
        return {"attention": None if self.attention is None else self.attention.to_dict(),
                "ffn": None if self.ffn is None else self.ffn.to_dict()}


def attention_settings() -> tuple[str, ...]:
    """``[model] attention`` values: the registered attention kinds (:mod:`meanfield.attention`),
    or ``"none"`` (the feed-forward flow alone)."""
    return (*attention_names(), "none")


def _build_layer(d: int, raw: Mapping[str, Any], prefix: str) -> Layer:
    """A layer from resolved raw keys; the attention matrices are checked even when unused."""
    attention = raw.get("attention", "softmax")
    settings = attention_settings()
    if attention not in settings:
        raise ModelError(f"{prefix}.attention: must be one of {list(settings)}, got {attention!r}"
                         f"{did_you_mean(attention, settings) if isinstance(attention, str) else ''}")
    heads = raw.get("heads")
    if heads is not None and not (isinstance(heads, Sequence) and not isinstance(heads, str) and heads
                                  and all(isinstance(h, Mapping) for h in heads)):
        raise ModelError(f"{prefix}.heads: must be a non-empty list of tables with Q, K, V, weight, got {heads!r}")
    alone = attention == "none"  # the feed-forward flow alone: the attention matrices are checked as softmax's
    model = AttentionModel.build(d, raw.get("beta"), "softmax" if alone else attention,  # type: ignore[arg-type]
                                 raw.get("Q"), raw.get("K"), raw.get("V"), heads, prefix=prefix)
    ffn = None if raw.get("ffn") is None else FeedForward.build(d, raw["ffn"], f"{prefix}.ffn")
    return Layer(None if alone else model, ffn)


def _inherit(previous: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """The raw keys of a layer: the previous layer's, with ``changes`` (heads vs Q, K, V exclusive)."""
    merged = dict(previous)
    if "heads" in changes:
        merged.update(Q=None, K=None, V=None)
    if any(k in changes for k in ("Q", "K", "V")):
        merged["heads"] = None
    merged.update({k: v for k, v in changes.items() if k != "t_end"})
    return merged


def _layer_end(spec: Mapping[str, Any], prefix: str, previous: float, previous_name: str) -> float:
    t_end = spec.get("t_end")
    if t_end is None:
        raise ModelError(f"{prefix}.t_end: required (the time at which this layer ends)")
    if positive_number(t_end, f"{prefix}.t_end") <= previous:
        raise ModelError(f"{prefix}.t_end: must be greater than {previous_name} = {previous:g} (layers end in "
                         f"increasing order), got {t_end!r}")
    return float(t_end)


@dataclass(frozen=True)
class LayerSchedule:
    """Piecewise-constant model parameters in time: ``layers[k]`` holds from ``starts[k]`` on.

    Attributes
    ----------
    layers
        The distinct consecutive layers (equal neighbours merged).
    starts
        Their start times, ``starts[0] = 0``, strictly increasing; the last layer holds forever.
    origins
        Where each layer was given in the config (``"model"`` or ``"model.layers[i]"``, the
        first of merged ones), for error messages.
    end
        The last ``t_end`` of the ``[[model.layers]]`` tables (``inf`` without layers): the
        schedule is meant for times up to it.
    """

    layers: tuple[Layer, ...]
    starts: tuple[float, ...]
    origins: tuple[str, ...]
    end: float = np.inf

    @classmethod
    def build(cls, d: int, model: Mapping[str, Any]) -> LayerSchedule:
        """Validate a ``[model]`` table (with optional ``layers``) and build its schedule in dimension d.

        Raises
        ------
        ModelError
            Naming the field: ``model.<key>``, ``model.layers[i].<key>``, ``model.layers[i].ffn.<key>``.
        """
        base = {k: model.get(k) for k in LAYER_MODEL_KEYS}
        base["attention"] = model.get("attention", "softmax")
        first = _build_layer(d, base, "model")
        specs = model.get("layers")
        if specs is None:
            return cls((first,), (0.0,), ("model",))
        if isinstance(specs, (str, Mapping)) or not isinstance(specs, Sequence) or not specs \
                or not all(isinstance(s, Mapping) for s in specs):
            raise ModelError(f"model.layers: must be a non-empty list of tables ([[model.layers]]), got {specs!r}")
        layers: list[Layer] = []
        starts: list[float] = []
        origins: list[str] = []
        raw, t_start, previous_name = base, 0.0, "0"
        for i, spec in enumerate(specs):
            prefix = f"model.layers[{i}]"
            for key in spec:
                if key not in LAYER_KEYS:
                    raise ModelError(f"{prefix}.{key}: unknown key{did_you_mean(str(key), LAYER_KEYS)}; "
                                     f"allowed: {sorted(LAYER_KEYS)}")
            t_end = _layer_end(spec, prefix, t_start, previous_name)
            raw = _inherit(raw, spec)
            layer = _build_layer(d, raw, prefix)
            if not layers or layer.to_dict() != layers[-1].to_dict():
                layers.append(layer)
                starts.append(t_start)
                origins.append(prefix)
            t_start, previous_name = t_end, f"{prefix}.t_end"
        return cls(tuple(layers), tuple(starts), tuple(origins), t_start)

    @property
    def boundaries(self) -> tuple[float, ...]:
        """The times at which the parameters change (the starts after the first)."""
        return self.starts[1:]

    def durations(self, t_final: float) -> list[float]:
        """How long each layer lasts within ``[0, t_final]`` (0 for a layer that starts later)."""
        ends = [*self.boundaries, np.inf]
        return [max(min(end, t_final) - start, 0.0) for start, end in zip(self.starts, ends)]

    @property
    def is_layered(self) -> bool:
        """True when the parameters change in time."""
        return len(self.layers) > 1

    def _count(self, t: float, after: bool) -> int:
        """Boundaries b with b <= t (``after``) or b < t, up to :func:`~meanfield.times.time_tol`."""
        shift = 1.0 if after else -1.0
        return sum(b <= t + shift * time_tol(b) for b in self.boundaries)

    def index_from(self, t: float) -> int:
        """The layer that moves the state on ``[t, t_next)`` (at a boundary: the layer starting there)."""
        return self._count(t, after=True)

    def index_until(self, t: float) -> int:
        """The layer that brought the state to t, on ``(t_prev, t]`` (at t = 0: the first)."""
        return self._count(t, after=False)

    def next_boundary(self, t: float) -> float | None:
        """The first boundary after t (beyond the tolerance), or ``None``."""
        k = self.index_from(t)
        return self.boundaries[k] if k < len(self.boundaries) else None

    def to_dict(self) -> list[dict[str, Any]]:
        """Plain data: ``[{"t_start": ..., "attention": ..., "ffn": ...}, ...]`` (equal problems, equal dicts)."""
        return [{"t_start": t, **layer.to_dict()} for t, layer in zip(self.starts, self.layers)]
