"""Causal attention (meanfield.masks.causal_slices): M position slices against exact facts of MODEL.md."""

import numpy as np
import pytest
from mpi4py import MPI
from scipy import linalg, special

from meanfield.config import load_config
from meanfield.discretisation.registry import scheme_class, scheme_options
from meanfield.drivers.pde import build_simulation
from meanfield.masks.causal_slices import CausalScheme, CausalVelocity, PrefixSums
from meanfield.nonlocal_field.base import FieldValues
from meanfield.positions import CausalPositions, NoPositions
from meanfield.sequence import slice_positions
from meanfield.timestepping import SSPRK3

S1_BUMPS = {"kind": "vmf", "centers": [[1.0, 0.0], [-0.5, 0.8]], "kappas": [4.0, 4.0]}


def simulation(comm=MPI.COMM_SELF, **sections):
    return build_simulation(load_config({"name": "test", **sections}), comm)


def causal_scheme(sim, slices, decay=0.0, normalise=False):
    """``slices`` slices of ``sim``'s scheme (its kind and options on its mesh, built with the
    slices' velocity)."""
    velocity = CausalVelocity(sim.field, slices, decay, normalise)
    kind = sim.problem.scheme.kind
    return CausalScheme(scheme_class(kind)(sim.scheme.msh, velocity, **scheme_options(kind, sim.problem.scheme)),
                        velocity)


def causal_run(sim, slices, density, T, dt_max, decay=0.0, normalise=False):
    """The stacked state of ``slices`` slices of ``sim``'s scheme at T, from ``density(p, s)``."""
    scheme = causal_scheme(sim, slices, decay, normalise)
    state = scheme.initial_state(density)
    return scheme, SSPRK3(scheme, 0.5, None, dt_max).advance(state, 0.0, T)


def test_slice_positions_midpoints():
    assert np.allclose(slice_positions(4), [0.125, 0.375, 0.625, 0.875])
    with pytest.raises(ValueError, match="slices"):
        slice_positions(0)


def test_prefix_sums_rescale_without_overflow():
    """Sums of values with very different shifts equal the unscaled sums."""
    rng = np.random.default_rng(0)
    parts = [FieldValues(rng.random((1, 5, 2)), rng.random((1, 5)), rng.uniform(-700, 700, (1, 5))) for _ in range(3)]
    sums = PrefixSums()
    for v in parts:
        sums.add(v, 0.5)
    top = np.max([v.log_scale for v in parts], axis=0)
    expected = 0.5 * sum(v.Z * np.exp(v.log_scale - top) for v in parts)
    assert np.allclose(sums.total.Z * np.exp(sums.total.log_scale - top), expected, rtol=1e-14)


@pytest.mark.parametrize("decay, normalise", [(0.0, False), (2.0, True)])
def test_one_batched_field_evaluation_per_stage(monkeypatch, decay, normalise):
    """A right-hand side of M slices evaluates the fields of the M measures in one batched call
    (prefix sums, not M^2; with positional decay a recursively weighted prefix); a scheme that
    asks for more slices than M without a new stage is refused."""
    sim = simulation(mesh={"sphere": "S1", "resolution": 32}, initial=S1_BUMPS, **{"nonlocal": {"method": "direct"}})
    scheme = causal_scheme(sim, 5, decay, normalise)
    state = scheme.initial_state(lambda p, s: np.exp(s * p[:, 0]))
    calls = []
    evaluator = sim.field.evaluator
    batched, one = evaluator.velocities, evaluator.evaluate_groups

    def counted(*args, **kwargs):
        calls.append(args[2].shape)
        return batched(*args, **kwargs)

    monkeypatch.setattr(evaluator, "velocities", counted)
    monkeypatch.setattr(evaluator, "evaluate_groups", lambda *args: calls.append("one") or one(*args))
    scheme.rhs_and_bound(state)
    assert calls == [(32, 5)]
    with pytest.raises(RuntimeError, match="more than 5 slices"):
        scheme.scheme.rhs_and_bound(scheme.split(state)[0])


def per_slice_rhs(scheme: CausalScheme, state: np.ndarray) -> tuple[np.ndarray, float]:
    """The slices' right-hand side one field evaluation after the other (the prefix path)."""
    scheme.velocity.start()
    out = [scheme.scheme.rhs_and_bound(part) for part in scheme.split(state)]
    return scheme.stack([rhs for rhs, _ in out]), max(rate for _, rate in out)


@pytest.mark.parametrize("method", ["direct", "fast"])
@pytest.mark.parametrize(("sphere", "resolution", "kind"), [("S1", 32, "fv"), ("S1", 16, "dg1"), ("S2", 1, "fv"),
                                                            ("S2", 1, "dg1")])
def test_the_batched_slices_equal_one_evaluation_per_slice(monkeypatch, sphere, resolution, kind, method):
    """The batched evaluation of the slices' fields gives the right-hand side of one evaluation
    per slice: to round-off with the same transforms (direct; fast with its NUFFTs), and to the
    field's tolerance when the fast field's batch takes the exact harmonic sums (one matrix
    product at the fixed points: taken here for any number of slices), with positional decay
    and a feed-forward block (finite volumes take the normal components only)."""
    import meanfield.nonlocal_field.fast as fast

    monkeypatch.setattr(fast, "BATCH_DIRECT_FUNCTIONS_PER_BASIS", 0.0)
    initial = S1_BUMPS if sphere == "S1" else {"kind": "vmf", "centers": [[0.0, 0.0, 1.0]], "kappas": [3.0]}
    d = 2 if sphere == "S1" else 3
    ffn = {"W": np.eye(d).tolist(), "A": (0.3 * np.roll(np.eye(d), 1, axis=1)).tolist(), "activation": "tanh"}
    for budget, tol in ((0, 1e-12), (fast.BATCH_DIRECT_BYTES, 1e-5))[: 1 if method == "direct" else 2]:
        monkeypatch.setattr(fast, "BATCH_DIRECT_BYTES", budget)
        sim = simulation(mesh={"sphere": sphere, "resolution": resolution}, scheme={"kind": kind}, initial=initial,
                         model={"beta": 3.0, "ffn": ffn}, **{"nonlocal": {"method": method}})
        scheme = causal_scheme(sim, 4, decay=1.5)
        state = scheme.initial_state(lambda p, s: np.exp((1 + s) * p[:, 0]))
        reference, rate = per_slice_rhs(scheme, state)
        batched, batched_rate = scheme.rhs_and_bound(state)
        scale = np.abs(reference).max()
        assert np.abs(batched - reference).max() <= tol * scale, (budget, np.abs(batched - reference).max() / scale)
        assert batched_rate == pytest.approx(rate, rel=tol, abs=0)


def test_a_causal_simulation_is_built_with_the_slices_velocity():
    """A causal config's simulation holds M slices whose scheme was built moving with the
    slices' velocity (a sixth slice in the stage of five is refused, as for a scheme built by
    hand); a config without a mask holds one density, its own single slice."""
    mesh, direct = {"sphere": "S1", "resolution": 32}, {"method": "direct"}
    sim = simulation(mesh=mesh, initial=S1_BUMPS, model={"mask": "causal"}, positions={"slices": 5},
                     **{"nonlocal": direct})
    assert isinstance(sim.positions, CausalPositions) and np.array_equal(sim.positions.s, slice_positions(5))
    assert len(sim.positions.split(sim.state)) == 5
    sim.stepper.scheme.rhs_and_bound(sim.state)
    with pytest.raises(RuntimeError, match="more than 5 slices"):
        sim.scheme.rhs_and_bound(sim.positions.split(sim.state)[0])
    plain = simulation(mesh=mesh, initial=S1_BUMPS, **{"nonlocal": direct})
    assert isinstance(plain.positions, NoPositions) and plain.positions.s is None
    assert [part is plain.state for part in plain.positions.split(plain.state)] == [True]


@pytest.mark.parametrize("sphere, resolution, kind", [("S1", 64, "fv"), ("S1", 32, "dg1"), ("S2", 1, "fv")])
def test_softmax_slices_of_s_independent_density_follow_the_non_causal_solution(sphere, resolution, kind):
    """SA, rho0 independent of s: N_k and Z_k are s_k times the non-causal ones, so every slice
    carries the non-causal solution (to round-off; same adaptive steps)."""
    config = {"mesh": {"sphere": sphere, "resolution": resolution}, "scheme": {"kind": kind},
              "model": {"attention": "softmax", "beta": 2.0}, "nonlocal": {"method": "direct"}}
    if sphere == "S1":
        config["initial"] = S1_BUMPS
    reference = simulation(**config)
    expected = reference.stepper.advance(reference.state, 0.0, 1.0)
    sim = simulation(**config)
    density = sim.problem.initial()
    scheme, state = causal_run(sim, 3, lambda p, s: density(p), 1.0, None)
    for part in scheme.split(state):
        assert np.max(np.abs(part - expected)) < 1e-12 * np.max(np.abs(expected))


@pytest.mark.parametrize("attention, m", [("unnormalized", 0), ("softmax", 0), ("softmax", 1), ("softmax", 2)])
def test_linear_growth_per_position(attention, m):
    """Uniform + eps s^m cos(theta) on S^1: slice amplitudes a_k(T) against the discrete-in-s
    solution ``expm(lambda T B) a(0)`` (B the midpoint prefix sums, rows divided by s_k under SA),
    lambda the non-causal rate measured on the same mesh with the same steps (to 2e-7: the
    remaining nonlinearity and round-off); and against the continuum solutions
    a0 I_0(2 sqrt(lambda s T)) (USA) and a0 s^m exp(lambda T / (m + 1)) (SA) within the
    midpoint rule's error in s (:func:`tolerance`)."""
    eps, T, M, beta = 1e-7, 0.5, 16, 2.0
    config, rate, a0, Y = mode_growth(attention, beta, eps, T)
    s = slice_positions(M)
    scheme, state = causal_run(simulation(**config), M, lambda p, sk: UNIFORM + eps * sk**m * mode(p), T, 0.02)
    measured = np.array([part @ Y for part in scheme.split(state)])
    B = (np.tril(np.ones((M, M)), -1) + 0.5 * np.eye(M)) / M
    if attention == "softmax":
        B /= s[:, None]
    initial = a0 * s**m
    discrete = linalg.expm(rate * T * B) @ initial
    assert np.max(np.abs(measured / discrete - 1)) < 1e-6
    if attention == "softmax":
        continuum = initial * np.exp(rate * T / (m + 1))
    else:
        continuum = initial * special.iv(0, 2.0 * np.sqrt(rate * s * T))
    assert np.all(np.abs(measured / continuum - 1) < tolerance(attention, m, s * M - 0.5))


UNIFORM = 1.0 / (2.0 * np.pi)


def mode(p):
    return np.cos(np.arctan2(p[:, 1], p[:, 0]))


def mode_growth(attention, beta, eps, T):
    """The config of a mode-1 growth test on S^1 (128 cells, direct field, dt_max 0.02), the
    non-causal rate of mode 1 measured on it (within 3 % of the exact rate), the amplitude a0 of
    ``eps cos(theta)`` and the cell weights Y that measure a state's amplitude."""
    config = {"mesh": {"sphere": "S1", "resolution": 128}, "model": {"attention": attention, "beta": beta},
              "nonlocal": {"method": "direct"}, "time": {"dt_max": 0.02}}
    reference = simulation(**config, initial={"kind": "expression", "expression": f"{UNIFORM} + {eps}*x"})
    g = reference.scheme.geometry
    Y = mode(g.centroid[: g.num_owned]) * g.measure[: g.num_owned]
    a0 = reference.state @ Y
    rate = np.log((reference.stepper.advance(reference.state, 0.0, T) @ Y) / a0) / T
    assert abs(rate / (special.iv(1, beta) / beta / (special.iv(0, beta) if attention == "softmax" else 1)) - 1) < 0.03
    return config, rate, a0, Y


@pytest.mark.parametrize("attention, normalise", [("unnormalized", True), ("softmax", False)])
@pytest.mark.parametrize("m", [0, 1, 2])
def test_linear_growth_with_positional_decay(attention, normalise, m):
    """Positional decay lambda = 2: normalised USA, and SA (the decay inside N and Z), obey
    d_t a(s) = rate int_0^s k_lambda(s, s') a(s') ds' with k_lambda = lambda e^{-lambda (s - s')} /
    (1 - e^{-lambda s}); in g = e^{lambda s} - 1 this is rate (1/g) int_0^g a dg, so
    a(0, s) = a0 g(s)^m gives a0 g^m exp(rate T / (m + 1)) (exact for m = 0: the slices stay
    s-independent).  Slices against this closed form within the midpoint rule's error: O(1) at
    the first slices (slice 0 feels only itself, as without decay), falling at second order in
    1/M at fixed s (the slices with s > 1/4, M = 16 and 32)."""
    eps, T, beta, decay = 1e-7, 0.5, 2.0, 2.0
    config, rate, a0, Y = mode_growth(attention, beta, eps, T)
    errors = []
    for M in (16, 32):
        s = slice_positions(M)
        g = np.expm1(decay * s)
        scheme, state = causal_run(simulation(**config), M, lambda p, sk: UNIFORM + eps * np.expm1(decay * sk)**m
                                   * mode(p), T, 0.02, decay, normalise)
        measured = np.array([part @ Y for part in scheme.split(state)])
        errors.append(np.max(np.abs(measured / (a0 * g**m * np.exp(rate * T / (m + 1))) - 1)[s > 0.25]))
    if m == 0:
        assert max(errors) < 1e-9
    else:
        assert errors[1] < 0.01 and 3.0 < errors[0] / errors[1] < 5.0, errors


def test_normalised_decay_keeps_an_s_independent_density_non_causal():
    """Normalised USA (any decay): the field of an s-independent density is the non-causal USA
    field, so every slice carries the run without mask (to round-off; same steps)."""
    config = {"mesh": {"sphere": "S1", "resolution": 64}, "initial": S1_BUMPS,
              "model": {"attention": "unnormalized", "beta": 2.0}, "nonlocal": {"method": "direct"}}
    reference = simulation(**config)
    expected = reference.stepper.advance(reference.state, 0.0, 1.0)
    sim = simulation(**config)
    density = sim.problem.initial()
    for decay in (0.0, 3.0):
        scheme, state = causal_run(sim, 4, lambda p, s: density(p), 1.0, None, decay, True)
        for part in scheme.split(state):
            assert np.max(np.abs(part - expected)) < 1e-12 * np.max(np.abs(expected))


def tolerance(attention, m, k):
    """Measured bound of the midpoint rule's error at slice k (M = 16, lambda T = 0.17): USA
    3.8e-5 (second order in 1/M); SA with m = 0 exact (round-off, 1.3e-10); SA with m >= 1
    about 0.03 / (k + 1/2)^2 (0.09 and 0.12 at slice 0, 1.3e-4 at the last)."""
    if attention == "unnormalized":
        return np.full_like(k, 1e-4)
    return np.full_like(k, 1e-9) if m == 0 else 0.04 / (k + 0.5) ** 2


def global_state(sim, scheme, state):
    """The stacked state in the serial mesh's cell order, on every rank."""
    from meanfield.discretisation.ordering import gather_rows

    g = scheme.geometry
    rows = gather_rows(sim.comm, state.reshape(g.num_owned, -1), g.original_index, sim.num_cells)
    return sim.comm.bcast(rows, root=0)


@pytest.mark.mpi
@pytest.mark.parametrize("kind, method, exact_batch", [("fv", "direct", False), ("dg1", "fast", False),
                                                      ("fv", "fast", True)])
def test_ranks_agree_and_fast_matches_direct(monkeypatch, kind, method, exact_batch):
    """USA with an s-dependent density on S^2: the run on all ranks equals the serial one to
    round-off, and the fast field the direct one to its tolerance; also with the fast field's batch
    by the exact sums (finite volumes: the normal components from two syntheses a measure)."""
    import meanfield.nonlocal_field.fast as fast

    if exact_batch:
        monkeypatch.setattr(fast, "BATCH_DIRECT_FUNCTIONS_PER_BASIS", 0.0)
    config = {"mesh": {"sphere": "S2", "resolution": 2}, "scheme": {"kind": kind},
              "model": {"attention": "unnormalized", "beta": 2.0}, "nonlocal": {"method": method, "tol": 1e-10}}

    def density(p, s):
        return np.exp(2.0 * (1.0 - s) * p[:, 2] + 2.0 * s * p[:, 0])

    results = {}
    for name, comm, how in (("serial", MPI.COMM_SELF, method), ("world", MPI.COMM_WORLD, method),
                            ("direct", MPI.COMM_SELF, "direct")):
        sim = simulation(comm, **{**config, "nonlocal": {"method": how, "tol": 1e-10}})
        scheme = causal_scheme(sim, 4)
        state = SSPRK3(scheme, 0.5, 0.05, None).advance(scheme.initial_state(density), 0.0, 0.5)
        results[name] = global_state(sim, scheme, state)
    scale = np.abs(results["serial"]).max()
    assert np.abs(results["world"] - results["serial"]).max() < 1e-12 * scale
    assert np.abs(results["direct"] - results["serial"]).max() < 1e-8 * scale


@pytest.mark.parametrize("decay, normalise", [(0.0, False), (2.0, False), (2.0, True), (0.0, True)])
def test_the_slice_kernel_is_the_measure_each_slice_feels(decay, normalise):
    """CausalVelocity.kernel() (the matrix the adjoint transposes) row k = the weights of the
    measure slice k's field is evaluated on, with decay and normalisation."""
    M = 6
    velocity = CausalVelocity(lambda targets, sources, weights: weights, M, decay, normalise)
    weights = np.random.default_rng(0).random((M, 5))
    felt = np.array([velocity(None, np.zeros(5), w) for w in weights])
    assert np.allclose(felt, velocity.kernel() @ weights, rtol=1e-14, atol=0)
    if normalise:
        assert np.allclose(velocity.kernel().sum(axis=1), 1.0)
    if decay == 0 and not normalise:  # without the keys: the midpoint prefix sums of before, exactly
        assert np.array_equal(velocity.kernel(), (np.tril(np.ones((M, M)), -1) + 0.5 * np.eye(M)) / M)
