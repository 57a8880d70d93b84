"""The training objective in memory (meanfield.training): parameters, losses and the gradient.

Taylor tests: the gradient's prediction ``dL/dtheta . e`` against central differences of the
objective along a random direction e of several parameters at once.  For finite volumes and DG1 with a fixed
step the adjoint is the exact discrete one, so the gap is O(eps^2) (it falls about fourfold
when eps halves), for every loss, the running cost and a causal run.
"""

from __future__ import annotations

import numpy as np
import pytest

from meanfield.config import ConfigError, load_config
from meanfield.training import MMD, Cells, CircleW2, Measure, Objective, Pair, Parameters, Sinkhorn, Target, make_loss

LAYERS = [{"t_end": 0.5}, {"t_end": 1.0, "beta": 1.5}]


def case(**sections) -> dict:
    """A small S^1 case (32 cells, fixed step, two layers) with ``sections`` merged in."""
    data = {"name": "fit", "mesh": {"sphere": "S1", "resolution": 32},
            "model": {"attention": "softmax", "beta": 2.0, "V": [[1, 0.3], [-0.2, 1]], "layers": LAYERS},
            "initial": {"kind": "expression", "expression": "1 + 0.5*cos(x + 2*y)"},
            "time": {"t_final": 1.0, "dt": 0.05}}
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return data


def gaps(objective: Objective, epsilons=(1e-2, 5e-3), seed: int = 1) -> np.ndarray:
    """Relative gaps between the gradient along a random direction and central differences."""
    theta = objective.start
    direction = np.random.default_rng(seed).standard_normal(len(theta))
    predicted = objective(theta)[1] @ direction
    fd = [(objective(theta + e * direction)[0] - objective(theta - e * direction)[0]) / (2 * e) for e in epsilons]
    return np.abs(np.array(fd) - predicted) / abs(predicted)


def assert_second_order(found: np.ndarray, floor: float = 1e-9) -> None:
    for big, small in zip(found[:-1], found[1:]):
        assert small <= floor or big / small > 3.0, found


def test_parameters_expand_wildcards_matrices_and_inherited_keys():
    """``[*]`` over layers, a whole matrix, and a layer's inherited V written into the layer."""
    data = load_config(case()).data
    params = Parameters(data, ["model.layers[*].V", "model.layers[1].beta"])
    assert params.names[:2] == ["model.layers[0].V[0][0]", "model.layers[0].V[0][1]"]
    assert len(params) == 9 and params.names[-1] == "model.layers[1].beta"
    assert params.values()[4:8].tolist() == [1, 0.3, -0.2, 1]  # layer 1 inherits [model] V
    assert params.values()[-1] == 1.5 and params.bounds()[-1][0] > 0
    moved = params.apply(np.arange(9.0) + 1)
    assert moved["model"]["layers"][1]["V"] == [[5.0, 6.0], [7.0, 8.0]] and moved["model"]["V"] == [[1, 0.3], [-0.2, 1]]
    q = Parameters(data, ["model.Q"])  # unset at the top: the identity
    assert q.values().tolist() == [1, 0, 0, 1]
    shared = {"b": [0.0, 0.0], "W": [[1, 0], [0, 1]], "A": [[0, 0], [0, 0]], "activation": "identity"}
    data = load_config(case(model={"layers": [{"t_end": 0.5, "ffn": shared}, {"t_end": 1.0, "ffn": shared}]})).data
    moved = Parameters(data, ["model.layers[*].ffn.b[1]"]).apply(np.array([1.0, 2.0]))  # one table, two layers
    assert [layer["ffn"]["b"][1] for layer in moved["model"]["layers"]] == [1.0, 2.0]


@pytest.mark.parametrize("text, message", [
    ("model.bta", "did you mean 'beta'"),
    ("model.layers[4].beta", "has 2 entries"),
    ("run.beta", "a parameter of the model"),
    ("model.attention", "not a number"),
])
def test_parameters_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        Parameters(load_config(case()).data, [text])


def test_mmd_is_the_kernel_distance_and_vanishes_only_at_the_target(rng):
    """The cell MMD against a direct double sum; its first variation against a difference quotient."""
    pts = rng.standard_normal((30, 3))
    pts /= np.linalg.norm(pts, axis=1)[:, None]
    a, b = rng.random(30), rng.random(30)
    a, b = a / a.sum(), b / b.sum()
    loss = MMD(kappa=1.5)
    target = Target("t", Measure(pts, b))
    value, variation = loss(Cells(pts, np.ones(30), a), target)
    kernel = np.exp(1.5 * pts @ pts.T)
    assert value == pytest.approx((a - b) @ kernel @ (a - b), rel=1e-12)
    assert loss(Cells(pts, np.ones(30), b), target)[0] == pytest.approx(0.0, abs=1e-13)
    e = np.zeros(30)
    e[3] = 1e-6
    fd = (loss(Cells(pts, np.ones(30), a + e), target)[0] - loss(Cells(pts, np.ones(30), a - e), target)[0]) / 2e-6
    assert fd == pytest.approx(variation[3], rel=1e-7)


def test_sinkhorn_divergence_is_zero_at_the_target_and_positive_elsewhere(rng):
    pts = rng.standard_normal((15, 2))
    pts /= np.linalg.norm(pts, axis=1)[:, None]
    a, b = rng.random(15) + 0.1, rng.random(15) + 0.1
    a, b = a / a.sum(), b / b.sum()
    loss = Sinkhorn(0.25)
    assert abs(loss.of_measure(Measure(pts, a), Target("a", Measure(pts, a)))) < 1e-10
    assert loss.of_measure(Measure(pts, a), Target("b", Measure(pts, b))) > 1e-4


def test_circle_w2_against_the_transport_linear_program(rng):
    """The exact W2^2 on S^1 (POT's circle search and the potential along the cut) against the
    transport linear program with the squared arc length as cost (POT's emd): the same value,
    and the same potential up to a constant (the program's dual, unique for these generic
    masses); S^2 is refused."""
    import ot

    angles, target_angles = rng.uniform(-np.pi, np.pi, 14), rng.uniform(-np.pi, np.pi, 9)
    points = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    target_points = np.stack([np.cos(target_angles), np.sin(target_angles)], axis=1)
    a, b = rng.random(14) + 0.1, rng.random(9) + 0.1
    a, b = a / a.sum(), b / b.sum()
    arc = np.abs(angles[:, None] - target_angles[None, :])
    cost = np.minimum(arc, 2 * np.pi - arc) ** 2
    value, log = ot.emd2(a, b, cost, log=True)
    loss, target = CircleW2(), Target("t", Measure(target_points, b))
    found, potential = loss(Cells(points, np.ones(14), a), target)
    assert found == pytest.approx(value, rel=1e-10)
    np.testing.assert_allclose(potential - potential.mean(), log["u"] - log["u"].mean(), atol=1e-9)
    assert loss.of_measure(Measure(target_points, b), target) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ConfigError, match="S\\^1 only"):
        loss.check(Target("t", Measure(np.eye(3), np.ones(3) / 3)), 3)


def test_circle_w2_taylor_second_order(comm):
    """The W2 loss through the PDE (16 cells): O(eps^2) for steps that cross no breakpoint of the
    piecewise-linear value (eps = 1e-3, 5e-4; measured on 32 cells: 8.6e-8 at 1e-3 and 8.6e-10
    at 1e-4, while at 1e-2 the differences cross breakpoints, 4.7e-3)."""
    objective = Objective(case(mesh={"resolution": 16}), ["model.layers[*].V[0][1]", "model.beta"], target="exp(2*x)",
                          loss="w2", comm=comm)
    found = gaps(objective, (1e-3, 5e-4))
    assert found[0] < 1e-5
    assert_second_order(found)


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["mmd", "observables", "ot"])
def test_gradient_taylor_second_order(loss, comm):
    """Every loss, nine parameters at once (both layers' V and a beta): O(eps^2)."""
    objective = Objective(case(), ["model.layers[*].V", "model.layers[1].beta"], target="exp(2*x)",
                          loss=make_loss(loss, observables=["x", "q=x**2 - y**2"] if loss == "observables" else ()),
                          comm=comm)
    found = gaps(objective)
    assert found[0] < 1e-3
    assert_second_order(found)


@pytest.mark.slow
def test_running_cost_and_regularisers_taylor(comm):
    """The running cost with l2 and l1 (away from 0): still O(eps^2)."""
    objective = Objective(case(), ["model.layers[*].V[0][1]", "model.beta"], target="exp(2*x)", loss="mmd",
                          running=True, l2=0.1, l1=0.05, comm=comm)
    found = gaps(objective, (1e-2, 5e-3, 2.5e-3))
    assert found[0] < 1e-4
    assert_second_order(found)


def test_progress_of_the_forward_run_and_the_backward_sweep(comm, capsys, monkeypatch):
    """With progress on (``meanfield fit`` unless quiet) each evaluation logs its forward run
    and backward sweep without a terminal (here at every step: no minute between lines)."""
    from meanfield.engine import progress

    monkeypatch.setattr(progress, "REPORT_EVERY", 0.0)
    objective = Objective(case(mesh={"resolution": 16}), ["model.beta"], target="exp(2*x)", comm=comm)
    objective(objective.start)
    assert capsys.readouterr().err == ""
    objective.progress = True
    objective(objective.start)
    err = capsys.readouterr().err if comm.rank == 0 else ""
    assert comm.rank != 0 or ("forward run: t 1/1 (100%)" in err and "backward sweep: step 20/20 (100%)" in err), err


def test_pairs_add_up(comm):
    """Two pairs with shared weights: the value and gradient are the sums of each pair's alone."""
    pairs = [Pair(None, "exp(2*x)"), Pair({"kind": "expression", "expression": "1 + 0.5*sin(y)"}, "exp(-x)")]
    params = ["model.layers[*].V[0][1]", "model.beta"]
    both = Objective(case(), params, pairs, comm=comm)
    alone = [Objective(case(), params, [p], comm=comm) for p in pairs]
    value, gradient = both(both.start)
    values, gradients = zip(*(o(o.start) for o in alone))
    assert value == pytest.approx(sum(values), rel=1e-13)
    np.testing.assert_allclose(gradient, np.sum(gradients, axis=0), rtol=1e-12)
    assert min(np.abs(g).max() for g in gradients) > 1e-4  # both pairs count


@pytest.mark.slow
def test_causal_taylor_second_order(comm):
    """A causal run (3 slices, a position-dependent input): the loss of the whole token
    distribution, its gradient O(eps^2)."""
    data = case(model={"mask": "causal"}, positions={"slices": 3},
                initial={"expression": "1 + 0.5*s*cos(x + 2*y)"})
    objective = Objective(data, ["model.layers[0].V", "model.beta"], target="exp(2*x)", comm=comm)
    found = gaps(objective)
    assert found[0] < 1e-3
    assert_second_order(found)


@pytest.mark.slow
def test_sphere_gradient(comm):
    """S^2 (level 1): agreement to 1e-4 (the upwind flux is only piecewise smooth, so the
    O(eps^2) law has kinks on S^2, as the adjoint's own test says)."""
    data = case(mesh={"sphere": "S2", "resolution": 1},
                model={"V": [[1, 0.3, 0], [0, 1, 0], [0.2, 0, 1]]},
                initial={"expression": "1 + 0.5*z + 0.3*x*y"}, time={"t_final": 1.0, "dt": 0.05})
    objective = Objective(data, ["model.layers[1].V", "model.layers[0].beta"], target="exp(2*z)", comm=comm)
    assert gaps(objective, (1e-4,))[0] < 1e-4


@pytest.mark.mpi
def test_one_and_two_ranks_agree(parallel_comm):
    """The value and gradient on all ranks against the same on one rank, to round-off."""
    from mpi4py import MPI

    def evaluate(comm):
        objective = Objective(case(), ["model.layers[*].V[1][0]", "model.beta"], target="exp(2*x)", comm=comm)
        return objective(objective.start)

    value, gradient = evaluate(parallel_comm)
    alone = evaluate(MPI.COMM_SELF) if parallel_comm.rank == 0 else None
    alone = parallel_comm.bcast(alone, root=0)
    assert value == pytest.approx(alone[0], rel=1e-12)
    np.testing.assert_allclose(gradient, alone[1], rtol=1e-9, atol=1e-13)


def test_dg1_taylor_second_order(comm):
    """DG1 (16 cells): the exact discrete adjoint of DG1 and SSP-RK3, started from the loss's
    first variation per cell (the loss sees the cell averages), gives the exact gradient of the
    discrete loss: O(eps^2) with the running cost, l2 and three parameters at once (measured
    1.9e-6, 4.8e-7; the old adjoint along the DG1 trajectory was off by 6e-2)."""
    objective = Objective(case(mesh={"resolution": 16}, scheme={"kind": "dg1"}),
                          ["model.layers[*].V[0][1]", "model.beta"], target="exp(2*x)", running=True, l2=0.1, comm=comm)
    found = gaps(objective)
    assert found[0] < 1e-4
    assert_second_order(found)
