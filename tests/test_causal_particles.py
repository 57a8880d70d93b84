"""Causal (decoder) attention for tokens (meanfield.masks.causal_tokens) against a masked O(n^2) sum."""

import numpy as np
import pytest
from scipy.stats import special_ortho_group

from meanfield.layers import LayerSchedule
from meanfield.masks.causal_tokens import CausalTokenField, PositionalDecay
from meanfield.velocity import LayerVelocity


def masked_velocity(heads, beta, softmax, x, weights, decay=0.0, normalise=False):
    """Token i's velocity from the tokens j <= i: plain numpy, the full n x n matrix per head;
    with positional decay ``e^{-decay (s_i - s_j)}`` in the logits, and divided by the
    positional mass ``sum_{j<=i} w_j e^{-decay (s_i - s_j)}`` when ``normalise``."""
    out = np.zeros_like(x)
    s = (np.arange(len(x)) + 0.5) / len(x)
    positional = np.tril(np.exp(-decay * np.abs(s[:, None] - s[None, :]))) * weights
    for head in heads:
        Q, K, V, w = (np.asarray(head[k]) for k in ("Q", "K", "V", "weight"))
        kernel = np.exp(beta * (x @ Q.T) @ (x @ K.T).T) * positional
        if normalise:
            kernel /= positional.sum(axis=1)[:, None]
        v = kernel @ (x @ V.T)
        out += w * (v / kernel.sum(axis=1)[:, None] if softmax else v)
    return out - np.sum(out * x, axis=1)[:, None] * x


def heads_of(d, kind, seed=1):
    """Head tables: ``spectral`` (Q = K = I, a scaled rotation, V random), ``general`` (Q^T K not a
    multiple of an orthogonal matrix) or ``mixed`` (one of each, weighted)."""
    rng = np.random.default_rng(seed)
    eye = np.eye(d)
    rotation = special_ortho_group.rvs(d, random_state=rng)
    spectral = [{"Q": eye, "K": eye, "V": eye, "weight": 1.0},
                {"Q": 1.3 * rotation, "K": eye, "V": eye + 0.3 * rng.standard_normal((d, d)), "weight": 0.7}]
    general = [{"Q": np.diag(0.5 + rng.random(d)), "K": eye + 0.2 * rng.standard_normal((d, d)), "V": eye,
                "weight": 1.0}]
    return {"spectral": spectral, "general": general, "mixed": [spectral[1], {**general[0], "weight": -0.4}]}[kind]


def causal_field(d, heads, beta, attention, method, tol=1e-6, block=64, comm=None, decay=0.0, normalise=False):
    table = {"beta": beta, "attention": attention,
             "heads": [{k: np.asarray(v).tolist() if k != "weight" else v for k, v in h.items()} for h in heads]}
    return CausalTokenField(LayerVelocity(LayerSchedule.build(d, table), comm, method, tol), comm, block,
                            PositionalDecay(decay, normalise))


#: (decay, normalise): none (today's model), ALiBi, ALiBi normalised over positions (DGR).
DECAYS = [(0.0, False), (3.0, False), (3.0, True)]


def tokens(n, d, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1)[:, None]


@pytest.mark.parametrize("d", [2, 3, 4])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("kind", ["spectral", "mixed"])
@pytest.mark.parametrize("decay, normalise", DECAYS)
def test_direct_route_equals_masked_sum(d, attention, kind, decay, normalise):
    """Blocked direct sums (n not a multiple of the block) = the masked O(n^2) sum, to round-off,
    with and without positional decay and normalisation."""
    heads, x = heads_of(d, kind), tokens(301, d)
    w = np.full(len(x), 1.0 / len(x))
    expected = masked_velocity(heads, 2.0, attention == "softmax", x, w, decay, normalise)
    X = causal_field(d, heads, 2.0, attention, "direct", block=64, decay=decay, normalise=normalise)(x, x, w)
    assert np.abs(X - expected).max() <= 1e-13 * np.abs(expected).max()


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
@pytest.mark.parametrize("kind", ["spectral", "general", "mixed"])
@pytest.mark.parametrize("decay, normalise", DECAYS)
def test_fast_route_within_tolerance(d, attention, kind, decay, normalise):
    """Prefix summaries (harmonic coefficients, basis moments) = the masked sum to the fast field's
    tol, with and without positional decay (recursively weighted prefix) and normalisation."""
    heads, x = heads_of(d, kind), tokens(600, d, seed=2)
    w = np.full(len(x), 1.0 / len(x))
    expected = masked_velocity(heads, 3.0, attention == "softmax", x, w, decay, normalise)
    scale = np.abs(expected).max()
    for tol in (1e-6, 1e-10, 1e-13):  # 1e-13: below the transforms, every head by the expansion
        X = causal_field(d, heads, 3.0, attention, "fast", tol=tol, block=50, decay=decay,
                         normalise=normalise)(x, x, w)
        assert np.abs(X - expected).max() <= tol * scale, tol


def test_first_token_sees_itself_alone():
    """Token 1 attends to itself only: under SA its velocity is P_x(V x), zero for V = I."""
    x = tokens(10, 3)
    w = np.full(10, 0.1)
    X = causal_field(3, heads_of(3, "spectral")[:1], 5.0, "softmax", "fast", block=4)(x, x, w)
    assert np.abs(X[0]).max() < 1e-15


@pytest.mark.mpi
@pytest.mark.parametrize("method", ["direct", "fast"])
@pytest.mark.parametrize("decay", [0.0, 3.0])
def test_ranks_agree(parallel_comm, method, decay):
    """Tokens split over the ranks (blocks cut across ranks): the serial velocity to round-off,
    with and without positional decay."""
    from mpi4py import MPI

    from meanfield.particles.system import token_block

    comm, n = parallel_comm, 333
    heads, x = heads_of(3, "mixed"), tokens(n, 3, seed=3)
    w = np.full(n, 1.0 / n)
    mine = token_block(n, comm.rank, comm.size)
    serial = causal_field(3, heads, 2.0, "softmax", method, block=50, comm=MPI.COMM_SELF, decay=decay)(x, x, w)[mine]
    local = np.ascontiguousarray(x[mine])
    parallel = causal_field(3, heads, 2.0, "softmax", method, block=50, comm=comm, decay=decay)(local, local, w[mine])
    assert np.abs(parallel - serial).max() <= 1e-13 * np.abs(serial).max()


def test_feed_forward_and_layers_compose_with_the_mask():
    """A layer's feed-forward block adds to the masked attention (tanh(A x) through W, projected);
    a layer without attention moves by the block alone; entering a layer switches the field."""
    d, x = 2, tokens(40, 2, seed=4)
    w = np.full(40, 1.0 / 40)
    ffn = {"W": [[0.0], [1.0]], "A": [[1.0, 0.0]], "activation": "tanh"}
    table = {"beta": 1.5, "ffn": ffn, "layers": [{"t_end": 1.0}, {"t_end": 2.0, "attention": "none"}]}
    field = CausalTokenField(LayerVelocity(LayerSchedule.build(d, table), None, "direct"), None, block=16)
    push = np.outer(np.tanh(x[:, 0]), [0.0, 1.0])
    push -= np.sum(push * x, axis=1)[:, None] * x
    identity = [{"Q": np.eye(d), "K": np.eye(d), "V": np.eye(d), "weight": 1.0}]
    expected = masked_velocity(identity, 1.5, True, x, w) + push
    assert np.abs(field(x, x, w) - expected).max() < 1e-13
    field.field.enter(1)
    assert np.abs(field(x, x, w) - push).max() < 1e-15


def test_auto_takes_the_direct_route_for_few_tokens_and_the_fast_one_for_many():
    field = causal_field(3, heads_of(3, "spectral"), 2.0, "softmax", "auto")
    assert field.route(field.field.evaluator, 100) is None
    field = causal_field(3, heads_of(3, "spectral"), 2.0, "softmax", "auto")
    assert field.route(field.field.evaluator, 100_000) is not None


def test_dgr_velocity_is_beta_times_the_normalised_decayed_velocity():
    """The model of Duerinckx, Geshkovski and Rossi (ALiBi normalised over positions) written as
    they write it on the circle: theta_j' = sum_k c_jk w'(theta_j - theta_k), w(u) = e^{beta cos u},
    c_jk = e^{-lambda (j - k)/N} / sum_k e^{-lambda (j - k)/N}.  It is beta times the velocity of
    unnormalized attention with ``decay = lambda`` and ``normalise = true``, so t_here = beta t_DGR.
    (Token k = j is included in both sums here: its term w'(0) = 0 moves nothing but counts in the
    normalisation; DGR's k < j differs from it by O(1/N) per token, not in the mean-field limit.)"""
    beta, decay, n = 2.5, 1.5, 97
    theta = np.random.default_rng(4).uniform(-np.pi, np.pi, n)
    x = np.column_stack([np.cos(theta), np.sin(theta)])
    j = np.arange(n)
    c = np.tril(np.exp(-decay * (j[:, None] - j[None, :]) / n))
    c /= c.sum(axis=1)[:, None]
    u = theta[:, None] - theta[None, :]
    dgr = np.sum(c * (-beta * np.sin(u) * np.exp(beta * np.cos(u))), axis=1)
    eye = np.eye(2).tolist()
    X = causal_field(2, [{"Q": eye, "K": eye, "V": eye, "weight": 1.0}], beta, "unnormalized", "direct", block=16,
                     decay=decay, normalise=True)(x, x, np.full(n, 1.0 / n))
    here = X[:, 1] * np.cos(theta) - X[:, 0] * np.sin(theta)  # theta' = <X, e_theta>
    assert np.abs(dgr - beta * here).max() < 1e-12 * np.abs(dgr).max()
