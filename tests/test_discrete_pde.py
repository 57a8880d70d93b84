"""The public interface of the assembled PDE (:class:`meanfield.discrete_pde.DiscretePDE`) on a small S^1 case."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI

from meanfield.config import load_config
from meanfield.discrete_pde import DiscretePDE
from meanfield.problem import Problem


def pde(**sections) -> DiscretePDE:
    data = {"name": "pde", "mesh": {"sphere": "S1", "resolution": 24}, "model": {"beta": 2.0},
            "initial": {"kind": "expression", "expression": "1 + 0.5*x"}, "time": {"t_final": 0.1, "dt": 0.05},
            **sections}
    return DiscretePDE(Problem(load_config(data)), MPI.COMM_SELF)


def test_observers_see_each_velocity_the_scheme_evaluates() -> None:
    plain = pde()
    seen: list[np.ndarray] = []
    with plain.observing_velocity(seen.append):
        plain.initial_rates()
    assert len(seen) == 1  # one layer, one evaluation of its right-hand side
    points, weights = plain.scheme.measure(plain.state)
    X = plain.field(plain.scheme.velocity_points, points, weights)
    assert np.abs(seen[0] - X).max() <= 1e-12 * np.abs(X).max()
    plain.initial_rates()
    assert len(seen) == 1 and not plain.velocity.observers  # the observer is gone after the block


@pytest.mark.parametrize("kind", ["fv", "dg1"])
def test_observers_see_the_causal_slices_velocities_where_the_scheme_takes_components(kind) -> None:
    """Finite volumes take only the normal components of the slices' batched field, DG1 the
    components in tangent frames; an observer still sees the M velocities in full, and the
    right-hand side is the same with and without."""
    causal = pde(model={"beta": 2.0, "mask": "causal"}, positions={"slices": 3}, scheme={"kind": kind},
                 initial={"kind": "expression", "expression": "1 + 0.5*s*x"})
    scheme = causal.stepper.scheme
    unobserved, rate = scheme.rhs_and_bound(causal.state)
    seen: list[np.ndarray] = []
    with causal.observing_velocity(seen.append):
        observed, observed_rate = scheme.rhs_and_bound(causal.state)
    assert len(seen) == 1 and seen[0].shape == (3,) + causal.scheme.velocity_points.shape
    assert np.abs(observed - unobserved).max() <= 1e-13 * np.abs(unobserved).max()  # DG1: 2e-14 (round-off)
    assert observed_rate == pytest.approx(rate, rel=1e-14, abs=0)
    points, _ = causal.scheme.measure(causal.split(causal.state)[2])
    columns = causal.scheme.measure_many(scheme.rows(causal.state)) @ causal.positions.kernel().T
    X = causal.field(causal.scheme.velocity_points, points, columns[:, 2])  # the last slice's own field
    assert np.abs(seen[0][2] - X).max() <= 1e-12 * np.abs(X).max()


def test_slices_cell_averages_and_gathering_of_a_causal_state() -> None:
    causal = pde(model={"beta": 2.0, "mask": "causal"}, positions={"slices": 3},
                 initial={"kind": "expression", "expression": "1 + 0.5*s*x"})
    causal.step(0.05)
    parts = causal.split(causal.state)
    assert causal.slice_count == len(parts) == 3
    assert np.allclose(causal.slice_positions, [1 / 6, 1 / 2, 5 / 6])
    per_slice = causal.slice_averages(causal.state)
    assert np.allclose(per_slice, [causal.scheme.cell_averages(part) for part in parts], rtol=0, atol=0)
    assert np.abs(causal.cell_averages(causal.state) - per_slice.mean(axis=0)).max() <= 1e-14
    _, areas = causal.owned_cells()
    assert np.allclose(per_slice @ areas, 1.0, rtol=0, atol=1e-13)  # each slice keeps mass 1
    gathered = causal.gather_slices(per_slice[..., None])
    assert gathered is not None
    assert np.array_equal(gathered[..., 0], causal.positions.arrays(causal.state, causal.gather)["density"])
    mesh = causal.mesh_arrays()
    assert mesh is not None and len(mesh["cells"]) == len(mesh["areas"]) == 24
    assert np.allclose(mesh["areas"], 2 * np.sin(np.pi / 24), rtol=0, atol=1e-14)  # the chords of 24 equal cells
