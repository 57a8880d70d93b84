"""The model's validation: every bad parameter gives one error naming its field."""

import numpy as np
import pytest

from meanfield.model import AttentionModel, ModelError, project_tangent


def test_defaults_to_identity_single_head():
    m = AttentionModel.build(3, 2.0)
    assert m.is_identity and m.attention == "softmax" and len(m.heads) == 1


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"beta": 0.0}, "model.beta"),
        ({"beta": -1.0}, "model.beta"),
        ({"beta": float("nan")}, "model.beta"),
        ({"beta": 1.0, "Q": [[1, 0], [0, 1]]}, "model.Q"),
        ({"beta": 1.0, "K": [[1, 0, 0], [0, 1, 0]]}, "model.K"),
        ({"beta": 1.0, "V": "eye"}, "model.V"),
        ({"beta": 1.0, "attention": "linear"}, "model.attention"),
        ({"beta": 1.0, "heads": [{"Q": np.eye(3), "W": 1}]}, "model.heads[0]"),
        ({"beta": 1.0, "heads": [{"V": np.eye(2)}]}, "model.heads[0].V"),
    ],
)
def test_bad_parameters_name_the_field(kwargs, field):
    with pytest.raises(ModelError, match=field.replace("[", r"\[").replace("]", r"\]")):
        AttentionModel.build(3, **kwargs)


def test_project_tangent_is_orthogonal(rng):
    x = rng.standard_normal((10, 3))
    x /= np.linalg.norm(x, axis=1)[:, None]
    v = project_tangent(x, rng.standard_normal((10, 3)))
    assert np.abs(np.einsum("ij,ij->i", x, v)).max() < 1e-15


def test_to_dict_round_trips():
    m = AttentionModel.build(2, 3.0, "unnormalized", heads=[{"Q": [[1, 2], [3, 4]], "weight": 0.5}, {}])
    again = AttentionModel.build(2, **{k: v for k, v in m.to_dict().items()})
    assert again.beta == 3.0 and len(again.heads) == 2
    assert np.array_equal(again.heads[0].Q, m.heads[0].Q) and again.heads[0].weight == 0.5


@pytest.mark.parametrize("attention", ["softmax", "unnormalized"])
def test_speed_bound_holds_and_softmax_attains_it(rng, attention):
    """|X[mu](x)| <= speed_bound() for random heads and measures; for softmax the bound is
    reached by a Dirac mass (a cluster) seen from a point where V y is tangent."""
    from meanfield.nonlocal_field.direct import DirectEvaluator

    heads = [{"Q": rng.standard_normal((3, 3)), "K": rng.standard_normal((3, 3)), "V": rng.standard_normal((3, 3)),
              "weight": w} for w in (0.7, -0.4)]
    model = AttentionModel.build(d=3, beta=2.0, attention=attention, heads=heads)
    x = rng.standard_normal((400, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    for sources in (x[:50], x[:1]):
        weights = np.full(len(sources), 1.0 / len(sources))
        speed = np.linalg.norm(DirectEvaluator(model).velocity(x, sources, weights), axis=1)
        assert speed.max() <= model.speed_bound() * (1 + 1e-12)
    one = AttentionModel.build(d=3, beta=2.0, attention="softmax")
    y = np.array([[0.0, 0.0, 1.0]])
    on_equator = np.array([[1.0, 0.0, 0.0]])
    assert np.linalg.norm(DirectEvaluator(one).velocity(on_equator, y, np.ones(1))) == pytest.approx(one.speed_bound())
