"""Random-weight layer schedules: a transformer at initialisation (``[model.random]``).

Pure numpy: nothing here knows of meshes, files or MPI.

Depth is time: layer ``l = 0, ..., L - 1`` holds on ``[l eta, (l + 1) eta)`` with ``H``
heads of weight ``1 / H`` each, and every head of every layer draws its own matrices,
independently, with Gaussian entries::

    Q, K ~ N(0, qk_std^2),   V ~ N(0, v_std^2)      (d x d, entrywise)

or, with ``value = "qk"`` or ``"-qk"``, ``V = +Q^T K`` or ``-Q^T K`` (the matrix of the logits'
bilinear form ``<Q x, K y> = x^T Q^T K y``: the symmetric choices of the random-weight
experiments, ``V = Q^T K`` attracting and ``-Q^T K`` repelling; V's entries are still drawn
and then replaced, so Q and K are those of ``value = "random"`` with the same seed); and,
with ``ffn_width = m > 0``, a feed-forward block per layer with ``W`` (d x m) entries
``N(0, 1 / m)``, ``A`` (m x d) entries ``N(0, 1 / d)`` and ``b = 0``.  The defaults
``qk_std = v_std = 1 / sqrt(d)`` are the usual (LeCun / Xavier) initialisation with fan-in d:
``|V x|``, ``|Q x|`` and ``|K x|`` are about 1 for a unit token, so the attention output has
the size of a token and the logits ``beta <Q x, K y>`` have variance ``beta^2 / d``.

The draws come from ``numpy.random.Generator(PCG64(seed))`` in a fixed order: layer by layer;
within a layer, head by head ``Q``, ``K``, ``V``, then the block's ``W`` and ``A``; each
matrix filled row by row by ``standard_normal`` and scaled.  Every rank draws the same
numbers, so a seed gives the same weights on any rank count, and the first layers of a
deeper draw are those of a shallower one.  The drawn schedule is an ordinary
:class:`~meanfield.layers.LayerSchedule`: the PDE and the particle system evolve it as any
other.  The exact weights are kept as arrays (:class:`DrawnWeights`, saved as ``weights.npz``
in a run directory), so that a run is redone and resumed with the weights it drew.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .layers import ACTIVATIONS, FeedForward, Layer, LayerSchedule
from .model import AttentionModel, Head, ModelError, did_you_mean, positive_number

#: Keys of a ``[model.random]`` table.
RANDOM_KEYS: tuple[str, ...] = ("layers", "eta", "heads", "qk_std", "v_std", "value", "seed", "ffn_width",
                                "ffn_activation", "weights", "per_prompt")
#: ``[model.random] value``: V drawn (``random``), or ``V = sign Q^T K`` with that sign.
VALUE_SIGNS: dict[str, float | None] = {"random": None, "qk": 1.0, "-qk": -1.0}
#: Arrays of a weights file: always ``Q``, ``K``, ``V``; ``W``, ``A``, ``b`` with a feed-forward block.
ATTENTION_ARRAYS: tuple[str, ...] = ("Q", "K", "V")
FFN_ARRAYS: tuple[str, ...] = ("W", "A", "b")


def _integer(value: object, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ModelError(f"{name}: must be an integer >= {least}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class RandomLayers:
    """The law of a random-weight schedule (a validated ``[model.random]`` table).

    Attributes
    ----------
    layers
        The number L of layers.
    eta
        Each layer's duration (the residual step): layer l holds on ``[l eta, (l + 1) eta)``.
    heads
        Heads H per layer, each of weight ``1 / H``.
    qk_std, v_std
        Standard deviations of the entries of Q and K, and of V (``None``: ``1 / sqrt(d)``).
    value
        ``"random"`` (V drawn), ``"qk"`` or ``"-qk"`` (``V = +-Q^T K``, module docstring).
    seed
        Seed of ``numpy.random.Generator(PCG64(seed))``.
    ffn_width
        Hidden width m of each layer's feed-forward block (0: none).
    ffn_activation
        The block's activation (:data:`meanfield.layers.ACTIVATIONS`).
    weights
        A weights file to read instead of drawing (``None``: draw), as given in the config.
    per_prompt
        In a batch of prompts (:mod:`meanfield.particles.batch`), prompt b draws its own weights
        with ``seed + b`` (False: the prompts share the weights of ``seed``); a single run is prompt 0.
    """

    layers: int
    eta: float
    heads: int = 1
    qk_std: float | None = None
    v_std: float | None = None
    value: str = "random"
    seed: int = 0
    ffn_width: int = 0
    ffn_activation: str = "relu"
    weights: str | None = None
    per_prompt: bool = False

    @classmethod
    def build(cls, spec: object, prefix: str = "model.random") -> RandomLayers:
        """Validate a raw ``[model.random]`` table; errors name the field under ``prefix``."""
        if not isinstance(spec, Mapping):
            raise ModelError(f"{prefix}: must be a table with keys {list(RANDOM_KEYS)}, got {spec!r}")
        for key in spec:
            if key not in RANDOM_KEYS:
                raise ModelError(f"{prefix}.{key}: unknown key{did_you_mean(str(key), RANDOM_KEYS)}; "
                                 f"allowed: {sorted(RANDOM_KEYS)}")
        if spec.get("per_prompt") is True and spec.get("layers") is None:
            raise ModelError(f"{prefix}.per_prompt: weights drawn per prompt need random weights ({prefix}.layers and "
                             f"{prefix}.eta)")
        for key in ("layers", "eta"):
            if spec.get(key) is None:
                raise ModelError(f"{prefix}.{key}: required")
        stds = {key: None if spec.get(key) is None else positive_number(spec[key], f"{prefix}.{key}")
                for key in ("qk_std", "v_std")}
        activation = spec.get("ffn_activation", "relu")
        if activation not in ACTIVATIONS:
            hint = did_you_mean(activation, ACTIVATIONS) if isinstance(activation, str) else ""
            raise ModelError(f"{prefix}.ffn_activation: must be one of {list(ACTIVATIONS)}, got {activation!r}{hint}")
        value = spec.get("value", "random")
        if value not in VALUE_SIGNS:
            hint = did_you_mean(value, list(VALUE_SIGNS)) if isinstance(value, str) else ""
            raise ModelError(f"{prefix}.value: must be one of {list(VALUE_SIGNS)}, got {value!r}{hint}")
        weights = spec.get("weights")
        if weights is not None and (not isinstance(weights, str) or not weights):
            raise ModelError(f"{prefix}.weights: must be the path of a weights file (.npz), got {weights!r}")
        per_prompt = spec.get("per_prompt", False)
        if not isinstance(per_prompt, bool):
            raise ModelError(f"{prefix}.per_prompt: must be true or false, got {per_prompt!r}")
        if per_prompt and weights is not None:
            raise ModelError(f"{prefix}.per_prompt: each prompt draws its own weights, so they cannot be read from "
                             f"{prefix}.weights; leave one of them out")
        return cls(layers=_integer(spec["layers"], f"{prefix}.layers", 1),
                   eta=positive_number(spec["eta"], f"{prefix}.eta"),
                   heads=_integer(spec.get("heads", 1), f"{prefix}.heads", 1),
                   seed=_integer(spec.get("seed", 0), f"{prefix}.seed", 0),
                   ffn_width=_integer(spec.get("ffn_width", 0), f"{prefix}.ffn_width", 0),
                   ffn_activation=activation, weights=weights, per_prompt=per_prompt, value=value, **stds)

    @property
    def depth(self) -> float:
        """The end of the last layer, ``L eta``."""
        return self.layers * self.eta

    def stds(self, d: int) -> tuple[float, float]:
        """``(qk_std, v_std)`` in dimension d, the defaults ``1 / sqrt(d)`` resolved."""
        default = 1.0 / np.sqrt(d)
        return (default if self.qk_std is None else self.qk_std, default if self.v_std is None else self.v_std)

    def weight_count(self, d: int) -> int:
        """Numbers in one draw's weights in dimension d (:meth:`draw`): Q, K, V per layer and
        head, and W, A, b per layer."""
        return self.layers * (3 * self.heads * d * d + self.ffn_width * (2 * d + 1))

    def draw(self, d: int) -> DrawnWeights:
        """The weights of every layer and head in dimension d, drawn in the order of the module docstring."""
        rng = np.random.Generator(np.random.PCG64(self.seed))
        qk, v = self.stds(d)
        L, H, m = self.layers, self.heads, self.ffn_width
        arrays = {name: np.empty((L, H, d, d)) for name in ATTENTION_ARRAYS}
        if m:
            arrays.update(W=np.empty((L, d, m)), A=np.empty((L, m, d)), b=np.zeros((L, m)))
        for layer in range(L):
            for head in range(H):
                for name, std in zip(ATTENTION_ARRAYS, (qk, qk, v)):
                    arrays[name][layer, head] = std * rng.standard_normal((d, d))
                sign = VALUE_SIGNS[self.value]
                if sign is not None:
                    arrays["V"][layer, head] = sign * arrays["Q"][layer, head].T @ arrays["K"][layer, head]
            if m:
                arrays["W"][layer] = rng.standard_normal((d, m)) / np.sqrt(m)
                arrays["A"][layer] = rng.standard_normal((m, d)) / np.sqrt(d)
        return DrawnWeights(**arrays)


@dataclass(frozen=True)
class DrawnWeights:
    """The drawn weights of every layer: ``Q``, ``K``, ``V`` of shape (L, H, d, d); with a
    feed-forward block ``W`` (L, d, m), ``A`` (L, m, d) and ``b`` (L, m), else ``None``."""

    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    W: np.ndarray | None = None
    A: np.ndarray | None = None
    b: np.ndarray | None = None

    @property
    def d(self) -> int:
        return int(self.Q.shape[-1])

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays by name (as saved)."""
        names = ATTENTION_ARRAYS + (FFN_ARRAYS if self.W is not None else ())
        return {name: getattr(self, name) for name in names}

    @classmethod
    def read(cls, path: str | Path, law: RandomLayers, d: int, name: str = "model.random.weights") -> DrawnWeights:
        """Weights saved by a run (``weights.npz``), checked against the law's L, H, m and d."""
        try:
            with np.load(path) as data:
                arrays = {key: np.array(data[key], dtype=float) for key in data.files}
        except (OSError, ValueError) as exc:
            raise ModelError(f"{name}: cannot read {path}: {exc}") from None
        expected: dict[str, tuple[int, ...]] = {"Q": (law.layers, law.heads, d, d), "K": (law.layers, law.heads, d, d),
                    "V": (law.layers, law.heads, d, d)}
        if law.ffn_width:
            m = law.ffn_width
            expected.update(W=(law.layers, d, m), A=(law.layers, m, d), b=(law.layers, m))
        if set(arrays) != set(expected):
            raise ModelError(f"{name}: {path} holds arrays {sorted(arrays)}, model.random asks for {sorted(expected)}")
        for key, shape in expected.items():
            if arrays[key].shape != shape:
                raise ModelError(f"{name}: {path} holds {key} of shape {arrays[key].shape}, model.random (layers, "
                                 f"heads, ffn_width) in d = {d} asks for {shape}")
            if not np.all(np.isfinite(arrays[key])):
                raise ModelError(f"{name}: {path} holds non-finite entries in {key}")
        return cls(**arrays)

    def schedule(self, law: RandomLayers, beta: float, attention: str) -> LayerSchedule:
        """The drawn layers as a :class:`~meanfield.layers.LayerSchedule` (layer l from ``l eta`` on).

        ``attention`` is a registered attention kind (``"softmax"``, ``"unnormalized"``, ...) or
        ``"none"`` (the blocks alone).
        """
        L, H = self.Q.shape[:2]
        layers = []
        for layer in range(L):
            heads = tuple(Head(self.Q[layer, h], self.K[layer, h], self.V[layer, h], 1.0 / H) for h in range(H))
            model = None if attention == "none" else AttentionModel(self.d, beta, attention, heads)
            ffn = None if self.W is None else FeedForward(self.W[layer], self.A[layer], self.b[layer],  # type: ignore
                                                          law.ffn_activation)
            layers.append(Layer(model, ffn))
        return LayerSchedule(tuple(layers), tuple(law.eta * k for k in range(L)),
                             tuple(f"model.random (layer {k})" for k in range(L)), law.depth)

