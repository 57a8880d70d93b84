"""Cluster analysis (meanfield.analysis.clusters) against cases with known answers.

Known answers: sums of well-separated von Mises-Fisher bumps (centres, masses, peak heights
and second moments computed independently by quadrature), cell-averaged (FV data) and
projected onto DG1 on curved cells; scripted frame sequences for tracking; exponential and
smooth growth for crossing times; quantile / Fibonacci tokens of a known density.
"""

from __future__ import annotations

import csv
import sys
from math import factorial

import numpy as np
import pytest
from scipy import integrate, optimize, special

from meanfield.analysis.clusters import analyse_fields, analyse_run, compare_frames, format_summary
from meanfield.analysis.clusters.cells import AnalysisMesh
from meanfield.analysis.clusters.coords import exp_map, geodesic, log_map
from meanfield.analysis.clusters.crossing import first_crossing
from meanfield.analysis.clusters.fields import CellAverages, DG1Data
from meanfield.analysis.clusters.files import write_basin_history
from meanfield.analysis.clusters.frame import analyse_field
from meanfield.analysis.clusters.particles import TokenField
from meanfield.analysis.clusters.plots import basin_history_figure, plot_history
from meanfield.initial import vmf_density
from meanfield.mesh import circle, icosphere
from meanfield.particles.sampling import fibonacci_sphere, quantile_circle
from meanfield.peaks.basins import ascent_roots, cluster_labels
from meanfield.peaks.graph import cell_graph
from meanfield.sphere import cell_averages, normalize

U1, U2 = 1.0 / (2.0 * np.pi), 1.0 / (4.0 * np.pi)


def on_circle(theta) -> np.ndarray:
    return np.stack([np.cos(theta), np.sin(theta)], axis=-1)


def mixture(centers, kappas, weights):
    return lambda x: sum(w * vmf_density(x, np.asarray(c, float), k) for c, k, w in zip(centers, kappas, weights))


def vmf_second_moment(kappa: float, d: int) -> float:
    """E[d(x, mu)^2] under vMF(mu, kappa) on S^{d-1}, by quadrature in the angle."""
    jac = (lambda a: 1.0) if d == 2 else np.sin
    num = integrate.quad(lambda a: a**2 * np.exp(kappa * (np.cos(a) - 1)) * jac(a), 0, np.pi, limit=200)[0]
    den = integrate.quad(lambda a: np.exp(kappa * (np.cos(a) - 1)) * jac(a), 0, np.pi, limit=200)[0]
    return num / den


def dg1_vertex_densities(mesh: AnalysisMesh, density) -> np.ndarray:
    """The DG1 state of a density: L2 projection of rho J onto linears in each reference cell."""
    rule = mesh.curved_rule
    values = density(rule.points.reshape(-1, mesh.d)).reshape(rule.points.shape[:2])
    load = np.einsum("cq,cq,qi->ci", values, rule.weights, rule.barycentric)
    nv = mesh.cells.shape[1]
    mass = (np.eye(nv) + 1.0) / (nv * (nv + 1)) / factorial(nv - 1)
    return load @ np.linalg.inv(mass) / rule.vertex_jacobians


# -- mesh graph and coordinates --------------------------------------------------------------

def test_cell_graph_is_the_vertex_one_ring():
    ring = cell_graph(circle(8).cells).neighbours
    assert sorted(ring[0].tolist()) == [1, 7] and sorted(ring[5].tolist()) == [4, 6]
    g = cell_graph(icosphere(0).cells)
    assert g.neighbours.shape == (20, 9) and np.all(g.neighbours >= 0)  # 3 edge + 6 vertex neighbours
    pairs = {tuple(e) for e in g.edges()}
    assert len(pairs) == 20 * 9 // 2 and all((j, i) not in pairs for i, j in pairs)
    assert g.ring(0, 2).tolist()[0] == 0 and len(g.ring(0, 2)) == 19 and len(g.ring(0, 3)) == 20  # 1 + 9 + 9 + 1


@pytest.mark.parametrize("d", [2, 3])
def test_normal_coordinates_round_trip(rng, d):
    o = normalize(rng.standard_normal(d))
    x = normalize(o + 0.3 * rng.standard_normal((50, d)))
    y = log_map(o, x)
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), geodesic(o, x), rtol=1e-12)
    np.testing.assert_allclose(exp_map(o, y), x, atol=1e-14)


# -- watershed and persistence ---------------------------------------------------------------

def test_watershed_persistence_and_threshold():
    graph = cell_graph(circle(12).cells)
    #                  0    1    2    3    4    5     6    7    8    9   10   11
    values = np.array([1.0, 3.0, 5.0, 3.0, 2.0, 4.0, 3.96, 4.0, 1.0, 1.5, 1.2, 0.9])
    roots = ascent_roots(values, graph)
    assert sorted(set(roots.tolist())) == [2, 5, 7, 9]  # every local maximum is a basin
    labels, peaks = cluster_labels(values, graph, threshold=0.0, prominence=0.0)
    assert peaks.tolist() == [2, 7, 5, 9]  # tallest first (ties: higher index)
    # the dip between 5 and 7 is 1% deep: a prominence of 2% merges them; 9 is 25% deep
    labels, peaks = cluster_labels(values, graph, threshold=0.0, prominence=0.02)
    assert peaks.tolist() == [2, 7, 9] and labels[5] == labels[7] == 1
    # a threshold of 2 hands the low bump at 9 to the neighbour across its higher saddle
    # (1.0 at cells 8-9, not 0.9 at 11-0)
    labels, peaks = cluster_labels(values, graph, threshold=2.0, prominence=0.02)
    assert peaks.tolist() == [2, 7] and labels[9] == labels[11] == labels[7] == 1 and labels[0] == 0
    labels, peaks = cluster_labels(values, graph, threshold=6.0, prominence=0.0)
    assert len(peaks) == 0 and np.all(labels == -1)


# -- peaks, masses and widths of separated bumps ---------------------------------------------

S1_CENTRES = [0.3, 2.5, -2.0]
S2_CENTRES = [normalize(np.array(v, float)) for v in ([1, 0.2, 0.3], [-0.5, 1, 0.1], [0.1, -0.4, -1])]
WEIGHTS = [0.5, 0.3, 0.2]


@pytest.mark.parametrize("kind, position_tol, height_tol, mass_tol, width_tol", [
    ("fv", 0.01, 2e-3, 5e-5, None), ("dg1", 0.01, 2e-3, 1e-8, 1e-4),
])
def test_s1_bumps(kind, position_tol, height_tol, mass_tol, width_tol):
    """Positions to a fraction of a cell, heights, masses to quadrature accuracy, widths (S^1, 256 cells).

    Measured: positions 7e-4-3e-3 h, heights 1e-4-8e-4; FV masses 5e-6-1e-5 (flat cells),
    widths as ``sqrt(w^2 + h^2/12)`` to 2%; DG1 masses 1e-10, widths 4e-7.
    """
    kappas = [200.0, 400.0, 800.0]
    centres = [on_circle(a) for a in S1_CENTRES]
    density = mixture(centres, kappas, WEIGHTS)
    raw = circle(256)
    mesh = AnalysisMesh(raw)
    field = (CellAverages(mesh, cell_averages(density, raw.points[raw.cells])[1]) if kind == "fv"
             else DG1Data(mesh, dg1_vertex_densities(mesh, density)))
    frame = analyse_field(field, 0.0, U1, 0.01)
    assert frame.count == 3 and frame.masses.sum() == pytest.approx(field.values @ field.areas, rel=1e-13)
    order = [int(np.argmin(geodesic(c, frame.positions))) for c in centres]
    h = mesh.cell_size
    for k, i in enumerate(order):
        assert geodesic(frame.positions[i], centres[k]) < position_tol * h
        assert frame.heights[i] == pytest.approx(density(centres[k][None])[0], rel=height_tol)
        assert frame.masses[i] == pytest.approx(WEIGHTS[k], abs=mass_tol)
        width = np.sqrt(vmf_second_moment(kappas[k], 2))
        if width_tol is None:  # piecewise-constant data: the cells add their own second moment, h^2/12
            assert frame.widths[i] == pytest.approx(np.sqrt(width**2 + h**2 / 12), rel=0.02)
        else:
            assert frame.widths[i] == pytest.approx(width, rel=width_tol)
    assert frame.maximum == frame.heights[0]


@pytest.mark.parametrize("kind, position_tol, height_tol, mass_tol, width_tol", [
    ("fv", 0.03, 0.08, 1e-3, 0.05), ("dg1", 0.03, 0.08, 3e-7, 1e-4),
])
def test_s2_bumps(kind, position_tol, height_tol, mass_tol, width_tol):
    """The same on the icosphere of level 4 (5120 cells, h = 0.05 rad), bumps 1.4-2.8 cells wide (sigma / h).

    Measured errors, widest to narrowest bump: position 0.003-0.02 h, height 0.2-6% (both from
    the averages, for FV and DG1 alike: the narrowest bump is 1.4 cells wide); FV mass
    2-6e-4 (flat cells hold O(h^2) less than the sphere), width 1-4.5%; DG1 mass 1-2e-7,
    width 1e-5.
    """
    kappas = [50.0, 100.0, 200.0]
    density = mixture(S2_CENTRES, kappas, WEIGHTS)
    raw = icosphere(4)
    mesh = AnalysisMesh(raw)
    field = (CellAverages(mesh, cell_averages(density, raw.points[raw.cells])[1]) if kind == "fv"
             else DG1Data(mesh, dg1_vertex_densities(mesh, density)))
    frame = analyse_field(field, 0.0, U2, 0.01)
    assert frame.count == 3
    for k, c in enumerate(S2_CENTRES):
        i = int(np.argmin(geodesic(c, frame.positions)))
        assert geodesic(frame.positions[i], c) < position_tol * mesh.cell_size
        assert frame.heights[i] == pytest.approx(density(c[None])[0], rel=height_tol)
        assert frame.masses[i] == pytest.approx(WEIGHTS[k], abs=mass_tol)
        assert frame.widths[i] == pytest.approx(np.sqrt(vmf_second_moment(kappas[k], 3)), rel=width_tol)


# -- tracking ----------------------------------------------------------------------------------

def _s1_frames(script, cells: int = 512, threshold: float = 1.5 * U1):
    """Frames of FV data of vMF mixtures on S^1: script = [(t, [(angle, kappa, weight), ...]), ...]."""
    raw = circle(cells)
    mesh = AnalysisMesh(raw)
    fields = []
    for t, bumps in script:
        if bumps:
            density = mixture([on_circle(a) for a, _, _ in bumps], [k for _, k, _ in bumps], [w for _, _, w in bumps])
        else:
            density = lambda x: np.full(len(x), U1)
        fields.append((t, CellAverages(mesh, cell_averages(density, raw.points[raw.cells])[1])))
    return analyse_fields(fields, "S1", threshold=threshold)


def test_tracking_keeps_ids_through_drift_and_records_a_scripted_merge():
    """Two bumps drift together and merge at t = 3; a third keeps its id; a fourth is born at t = 4."""
    script = []
    for t in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0):
        a = 0.6 - 0.2 * t  # the pair at +-a
        bumps = [(a, 60.0, 0.3), (-a, 60.0, 0.25)] if t < 3 else [(0.0, 60.0, 0.55)]
        bumps.append((2.5 + 0.1 * t, 30.0, 0.35))
        if t >= 4:
            bumps.append((-2.0, 40.0, 0.1))
        script.append((t, bumps))
    history = _s1_frames(script)
    assert history.counts.tolist() == [3, 3, 3, 2, 3, 3]
    merge, birth = history.events
    assert (merge.kind, birth.kind, birth.time) == ("merge", "birth", 4.0)
    # the merge time (meanfield.merging): the peaks, s0 apart at t = 2 and one at t = 3, reach
    # 0.01 rad at 2 + (s0 - 0.01) / s0 (linear in s when one of them is gone)
    s0 = float(geodesic(history.frames[2].positions[0], history.frames[2].positions[1]))
    assert s0 == pytest.approx(0.4, abs=0.02) and merge.time == pytest.approx(2.0 + (s0 - 0.01) / s0, rel=1e-12)
    third = history.ids[0][int(np.argmin(geodesic(history.frames[0].positions, on_circle(2.5))))]
    heavier = history.ids[0][int(np.argmin(geodesic(history.frames[0].positions, on_circle(0.6))))]
    lighter = history.ids[0][int(np.argmin(geodesic(history.frames[0].positions, on_circle(-0.6))))]
    assert merge.ids == (heavier, lighter)  # survivor (the heavier) first
    assert birth.ids == (3, third)  # a new id; at t = 3 its peak cell was in the third bump's region
    track = history.track(third)
    assert len(track["t"]) == 6  # the third bump keeps its id throughout
    np.testing.assert_allclose(np.arctan2(track["positions"][:, 1], track["positions"][:, 0]),
                               2.5 + 0.1 * track["t"], atol=1e-3)
    assert history.track(heavier)["masses"][-1] == pytest.approx(0.55, abs=1e-3)
    assert lighter not in history.ids[-1]
    assert merge.masses == pytest.approx((0.3, 0.25), abs=5e-3)  # each just before (its basin), as longtime's
    # the picture: one linear t axis, the merge marked on every panel at its time
    count, paths, heights = basin_history_figure(history).axes
    assert {ax.get_xscale() for ax in (count, paths, heights)} == {"linear"}
    for ax in (count, paths, heights):
        marks = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
        assert len(marks) == 1 and marks[0].get_xdata()[0] == merge.time
    assert [t.get_text() for t in count.get_legend().get_texts()] == [f"merge at t = {merge.time:.4g}"]
    (cross,) = [line for line in paths.get_lines() if line.get_marker() == "x"]
    assert cross.get_ydata()[0] == pytest.approx(0.0, abs=0.02)  # at the survivor's peak


def test_events_table_has_the_columns_of_longtime(tmp_path):
    """events.csv of ``meanfield clusters`` and <name>-events.csv of ``meanfield longtime``: one
    writer, the same columns; a merge row carries both ids and both masses."""
    from meanfield.analysis.events import EVENT_COLUMNS, Event, write_events
    from meanfield.analysis.longtime.events import point_set_history
    from meanfield.analysis.longtime.files import write_point_set_history

    history = _s1_frames([(0.0, [(0.2, 60.0, 0.3), (-0.2, 60.0, 0.25)]), (1.0, [(0.0, 60.0, 0.55)])])
    write_basin_history(tmp_path, history)
    with open(tmp_path / "events.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == EVENT_COLUMNS == ("kind", "time", "kept", "absorbed", "kept_mass", "absorbed_mass")
    (merge,) = history.events
    assert rows == [{"kind": "merge", "time": repr(merge.time), "kept": str(merge.kept),
                     "absorbed": str(merge.absorbed), "kept_mass": repr(merge.masses[0]),
                     "absorbed_mass": repr(merge.masses[1])}]
    points = point_set_history([(0.0, np.array([1.0, 1.5]), np.array([0.5, 0.5]), np.arange(2))])
    (path, *_) = [p for p in write_point_set_history(points, tmp_path, "x") if p.name == "x-events.csv"]
    assert path.read_text().splitlines()[0] == ",".join(EVENT_COLUMNS)
    write_events(tmp_path / "birth.csv", [Event("birth", 2.0, (4,), (0.0, 0.0))])
    assert (tmp_path / "birth.csv").read_text().splitlines()[1] == "birth,2.0,4,,,"


def test_a_bump_that_sinks_below_the_threshold_vanishes_not_merges():
    """A small bump beside a big one loses its mass: its peak sinks below the threshold while its
    place becomes part of the big bump's region -- a death (vanished), not a merge."""
    history = _s1_frames([(0.0, [(0.0, 40.0, 0.85), (1.5, 40.0, 0.15)]), (1.0, [(0.0, 40.0, 0.98), (1.5, 40.0, 0.02)])])
    assert history.counts.tolist() == [2, 1]
    assert [(e.kind, e.ids, e.time) for e in history.events] == [("death", (1,), 1.0)]
    assert "vanished at t = 1: cluster 1 (its peak sank below the threshold)" in format_summary(history)
    assert "merge    at" not in format_summary(history) and "  no merge\n" in format_summary(history)


def test_tracking_death_when_no_cluster_is_left():
    history = _s1_frames([(0.0, [(0.0, 40.0, 0.5), (3.0, 40.0, 0.5)]), (1.0, [])])
    assert history.counts.tolist() == [2, 0]
    assert sorted((e.kind, e.ids) for e in history.events) == [("death", (0,)), ("death", (1,))]


# -- crossing times --------------------------------------------------------------------------

def test_crossing_is_exact_for_exponential_growth():
    times = np.array([0.0, 0.3, 0.7, 1.6, 2.0, 2.9, 3.3])  # uneven outputs
    heights = 0.2 * np.exp(1.7 * times)
    for level in (0.25, 1.0, 5.0, 0.2 * np.exp(1.7 * 3.3)):
        assert first_crossing(times, heights, level) == pytest.approx(np.log(level / 0.2) / 1.7, abs=1e-12)
    assert np.isnan(first_crossing(times, heights, 0.1))  # already reached at the first output
    assert np.isnan(first_crossing(times, heights, 100.0))  # never reached


def test_crossing_is_fourth_order_for_smooth_growth():
    """Logistic growth (log h neither linear nor cubic): the error falls ~16x per halving of the output step."""
    def height(t):
        return 1.0 / (0.02 + np.exp(-2.0 * t))

    exact = -np.log(1.0 / 30.0 - 0.02) / 2.0  # height(t) = 30
    errors = [abs(first_crossing(np.arange(0.0, 5.0, dt), height(np.arange(0.0, 5.0, dt)), 30.0) - exact)
              for dt in (0.2, 0.1, 0.05)]
    order = np.log2(errors[0] / errors[2]) / 2.0  # measured 4.1 (3.4 then 4.9: where the level falls in its bracket)
    assert order > 3.5, errors


def test_history_crossings_of_a_growing_bump():
    """A vMF bump whose peak grows like 2 e^{0.8 t} x uniform reaches 5x uniform at log(2.5) / 0.8."""
    script = []
    for t in np.arange(0.0, 4.01, 0.25):
        target = 2.0 * U1 * np.exp(0.8 * t)  # peak of vMF(kappa) on S^1: 1 / (2 pi ive(0, kappa))
        kappa = optimize.brentq(lambda k, h=target: 1.0 / (2 * np.pi * special.ive(0, k)) - h, 1e-3, 1e4)
        script.append((float(t), [(1.0, kappa, 1.0)]))
    history = _s1_frames(script, cells=4096, threshold=U1)
    assert history.ids[-1].tolist() == [0] and not history.events
    assert history.crossing(5.0, 0) == history.crossing(5.0, None)
    assert history.crossing(5.0, 0) == pytest.approx(np.log(2.5) / 0.8, abs=1e-4)
    assert history.crossing(20.0, 0) == pytest.approx(np.log(10.0) / 0.8, abs=1e-4)


# -- particles -------------------------------------------------------------------------------

def test_particle_basins_from_quantile_tokens():
    """Quantile tokens of three vMF bumps (n = 8000) on 1024 cells.

    The estimate of a von Mises bump with the von Mises kernel peaks at its centre with height
    ``w I_0(kappa + kappa_h) / (2 pi I_0(kappa) I_0(kappa_h))``; quantile tokens are a midpoint
    rule in the mass coordinate, spectrally accurate for these sums (measured: positions
    1e-13 rad, masses 1e-14, heights 1e-12, widths 2-4e-4 of the exact second moment).
    """
    kappas = [50.0, 100.0, 200.0]
    centres = [on_circle(a) for a in S1_CENTRES]
    density = mixture(centres, kappas, WEIGHTS)
    mesh = AnalysisMesh(circle(1024))
    field = TokenField(mesh, quantile_circle(8000, density))
    frame = analyse_field(field, 0.0, U1, 0.01)
    assert frame.count == 3 and frame.masses.sum() == pytest.approx(1.0, abs=1e-12)
    kh = field.kappa
    for k, c in enumerate(centres):
        i = int(np.argmin(geodesic(c, frame.positions)))
        peak = WEIGHTS[k] * special.ive(0, kappas[k] + kh)
        peak /= (2 * np.pi * special.ive(0, kappas[k]) * special.ive(0, kh))
        assert geodesic(frame.positions[i], c) < 1e-9
        assert frame.masses[i] == pytest.approx(WEIGHTS[k], abs=1e-9)
        assert frame.heights[i] == pytest.approx(peak, rel=1e-9)
        assert frame.widths[i] == pytest.approx(np.sqrt(vmf_second_moment(kappas[k], 2)), rel=1e-3)


def test_particle_basins_from_fibonacci_tokens():
    """Fibonacci tokens of three vMF bumps (n = 20000) on the level-3 icosphere (measured: positions
    1e-9-2e-6 cells, masses to one token, widths 1e-4-2e-3)."""
    kappas = [20.0, 40.0, 80.0]
    density = mixture(S2_CENTRES, kappas, WEIGHTS)
    mesh = AnalysisMesh(icosphere(3))
    field = TokenField(mesh, fibonacci_sphere(20000, density))
    frame = analyse_field(field, 0.0, U2, 0.01)
    assert frame.count == 3
    for k, c in enumerate(S2_CENTRES):
        i = int(np.argmin(geodesic(c, frame.positions)))
        assert geodesic(frame.positions[i], c) < 1e-4 * mesh.cell_size
        assert frame.masses[i] == pytest.approx(WEIGHTS[k], abs=1.5 / 20000)
        assert frame.widths[i] == pytest.approx(np.sqrt(vmf_second_moment(kappas[k], 3)), rel=5e-3)


def test_basin_rule_counts_two_touching_clusters_that_links_join():
    """Two bumps bridged by a chain of tokens: the link rule sees one cluster, the basin rule two."""
    from meanfield.analysis.diagnostics import cluster_sizes

    density = mixture([on_circle(0.0), on_circle(0.25)], [500.0, 500.0], [0.5, 0.5])
    x = quantile_circle(4000, density)
    assert np.sum(cluster_sizes(x, eps=1e-3) >= 0.01) == 1
    frame = analyse_field(TokenField(AnalysisMesh(circle(1024)), x), 0.0, U1, 0.01)
    assert frame.count == 2 and frame.masses == pytest.approx([0.5, 0.5], abs=1e-3)


# -- comparison, files, plots and the run API ------------------------------------------------

def test_compare_frames_matches_by_position():
    mesh = AnalysisMesh(circle(512))
    raw = mesh.raw

    def frame(angles, weights):
        density = mixture([on_circle(a) for a in angles], [80.0, 80.0], weights)
        return analyse_field(CellAverages(mesh, cell_averages(density, raw.points[raw.cells])[1]), 0.0, U1, 0.01)

    a, b = frame([0.0, 2.0], [0.6, 0.4]), frame([2.01, -3.0], [0.5, 0.5])
    c = compare_frames(a, b)
    assert len(c.pairs) == 1 and c.unmatched == 2
    assert c.position[0] == pytest.approx(0.01, abs=1e-3) and c.mass[0] == pytest.approx(-0.1, abs=1e-3)


def _png_size(path) -> tuple[int, int]:
    """(width, height) of a PNG image from its header."""
    import struct

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


def test_files_plot_and_summary(tmp_path):
    import matplotlib

    backend = matplotlib.get_backend()
    pyplot_loaded = "matplotlib.pyplot" in sys.modules
    history = _s1_frames([(t, [(0.5 * t, 50.0 + 20 * t, 0.6), (2.5, 40.0, 0.4)]) for t in (0.0, 0.5, 1.0)])
    paths = write_basin_history(tmp_path, history)
    plot_history(tmp_path / "clusters.png", history)
    with open(paths[0]) as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["t", "id", "x", "y", "theta", "height", "mass", "width"]
    assert len(rows) == 6 and {r["id"] for r in rows} == {"0", "1"}
    for r in rows:
        assert float(r["theta"]) == pytest.approx(np.arctan2(float(r["y"]), float(r["x"])))
    with open(paths[2]) as fh:
        crossings = list(csv.DictReader(fh))
    assert {c["id"] for c in crossings} == {"max", "0", "1"} and len(crossings) == 3 * 5
    for c in crossings:  # a time exactly when crossed; otherwise why not
        assert (c["time"] != "") == (c["status"] == "crossed") and c["status"] in ("crossed", "already", "never")
    assert _png_size(tmp_path / "clusters.png") == (1500, 420)  # figsize (15, 4.2) at dpi 100
    count, paths_ax, heights = basin_history_figure(history).axes
    assert count.get_xscale() == "linear" and heights.get_yscale() == "log" and paths_ax.get_ylim() == (-np.pi, np.pi)
    assert [ax.get_ylabel() for ax in (count, paths_ax, heights)] == ["clusters", "theta (rad)", "height / uniform"]
    assert len(paths_ax.get_lines()) == 2 and len(heights.get_lines()) == 3  # two tracks; and the global max
    assert matplotlib.get_backend() == backend and ("matplotlib.pyplot" in sys.modules) == pyplot_loaded
    summary = format_summary(history).splitlines()
    assert summary[1] == "  no merge" and "  clusters: 2 at t = 0 (each output's clusters: clusters.csv)" in summary


def test_analyse_fv_run_directory(tmp_path):
    """A real (FV, S^2) run directory end to end; data whose cells do not match the mesh is refused."""
    from mpi4py import MPI

    import meanfield
    from meanfield.analysis.clusters import cluster_study

    config = {"name": "c", "mesh": {"sphere": "S2", "resolution": 3}, "model": {"beta": 6.0},
              "initial": {"kind": "vmf", "centers": [[0, 0, 1], [1, 0, 0]], "kappas": [8.0, 8.0]},
              "time": {"t_final": 1.0, "outputs": 4}, "output": {"xdmf": False}}
    run = meanfield.run(config, out=tmp_path / "run", comm=MPI.COMM_SELF, quiet=True)
    history = cluster_study(tmp_path / "run", quiet=True)
    assert history.counts.tolist() == [2] * 5 and history.info["data"] == "averages" and history.info["scheme"] == "fv"
    for name in ("clusters.csv", "events.csv", "crossings.csv", "clusters.png"):
        assert (tmp_path / "run" / "clusters" / name).is_file()
    np.testing.assert_allclose(history.frames[0].masses, [0.5, 0.5], atol=2e-3)
    assert np.all(np.diff(history.maxima) > 0)  # the two clusters sharpen
    run.centroids = run.centroids[::-1]  # cells that do not match the mesh are refused
    with pytest.raises(ValueError, match="centroids"):
        analyse_run(run)


@pytest.mark.parametrize("sphere, resolution", [("S1", 64), ("S2", 2)])
def test_dg1_state_is_read_consistently(tmp_path, sphere, resolution):
    """The DG1 vertex densities give back the run's cell averages and curved cell measures."""
    from helpers.runs import pde_result

    initial = ({"kind": "vmf", "centers": [[1, 0], [0, 1]], "kappas": [4.0, 2.0]} if sphere == "S1"
               else {"kind": "vmf", "centers": [[0, 0, 1], [1, 0, 0]], "kappas": [4.0, 2.0]})
    config = {"mesh": {"sphere": sphere, "resolution": resolution}, "scheme": {"kind": "dg1"},
              "model": {"beta": 4.0}, "initial": initial, "time": {"t_final": 0.5}}
    result = pde_result(config, [0.0, 0.5], tmp_path / "run")
    history = analyse_run(result)
    assert history.info["data"] == "dg1 state" and history.counts.tolist() == [2, 2]
    mesh = AnalysisMesh(circle(resolution) if sphere == "S1" else icosphere(resolution))
    for rho, vertex in zip(result.densities, result.vertex_densities):
        field = DG1Data(mesh, vertex)
        np.testing.assert_allclose(field.areas, result.areas, rtol=1e-13)
        np.testing.assert_allclose(field.values, rho, rtol=1e-12)


def test_particle_run_diagnostics_use_the_basin_rule(tmp_path):
    """A quantile-sampled particle run: diagnostics.csv counts density basins (auto), links on request."""
    from mpi4py import MPI

    from meanfield.analysis.diagnostics import resolve_rule, write_diagnostics
    from meanfield.drivers.particles import run_particles

    config = {"name": "p", "mesh": {"sphere": "S1", "resolution": 256}, "model": {"beta": 9.0},
              "initial": {"kind": "harmonic", "degree": 3, "amplitude": 0.1},
              "time": {"t_final": 1.0, "outputs": 2}, "particles": {"sampler": "quantile", "dt": 0.05}}
    run = run_particles(config, n=600, out=tmp_path / "p", comm=MPI.COMM_SELF, quiet=True)
    write_diagnostics(run.path)
    with open(run.path / "diagnostics.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["rule"] for r in rows] == ["basins"] * 3 and [int(r["clusters"]) for r in rows] == [3, 3, 3]
    assert float(rows[-1]["largest_cluster"]) == pytest.approx(1 / 3, abs=2e-3)
    links = write_diagnostics(run.path, rule="links")
    assert links["clusters"][0] == 1  # the uniform-ish start is one linked component
    with pytest.raises(ValueError, match="rule"):
        resolve_rule("basins", 4)
    assert resolve_rule("auto", 4) == "links"


@pytest.mark.parametrize("data", ["fv", "tokens"])
def test_s1_region_ends_at_the_minimum_between_touching_bumps(data):
    """Two overlapping bumps (saddle at half the lower peak): masses split at the density minimum.

    Ends on cell vertices are off by rho_saddle x (distance of the vertex from the minimum),
    5e-3 here; moved to the reconstructed minimum (7.6e-5 rad off), FV masses are off by 8e-5.
    Tokens use a bandwidth of h / 5 (the estimate's bias moves its minimum by about
    h^2 |rho'''| / (2 rho'')); measured 1.6e-4.
    """
    density = mixture([on_circle(-0.2), on_circle(0.1)], [120.0, 80.0], [0.55, 0.45])
    f = lambda t: density(on_circle(np.atleast_1d(t)))
    df = lambda t: (f(t + 1e-6) - f(t - 1e-6))[0] / 2e-6
    low = optimize.brentq(df, -0.15, 0.05, xtol=1e-13)
    left = integrate.quad(lambda t: f(t)[0], low - np.pi, low, limit=200, points=[-0.2])[0]
    raw = circle(256)
    mesh = AnalysisMesh(raw)
    if data == "fv":
        field = CellAverages(mesh, cell_averages(density, raw.points[raw.cells])[1])
        tol = 2e-4
    else:
        field = TokenField(mesh, quantile_circle(20000, density), bandwidth=mesh.cell_size / 5)
        tol = 3e-4
    frame = analyse_field(field, 0.0, U1, 0.01)
    assert frame.count == 2
    i = int(np.argmin(geodesic(on_circle(-0.2), frame.positions)))
    assert frame.masses[i] == pytest.approx(left, abs=tol)
    assert f(low)[0] > 0.5 * f(0.1)[0]  # a high saddle
    on_vertices = (field.values * mesh.areas)[frame.labels == i].sum() if data == "fv" else None
    assert on_vertices is None or abs(on_vertices - left) > 10 * tol


def test_clusters_command_writes_tables_and_refuses_a_foreign_folder(tmp_path, capsys):
    from mpi4py import MPI

    import meanfield
    from meanfield.cli import main

    meanfield.run({"name": "c", "mesh": {"sphere": "S1", "resolution": 128}, "model": {"beta": 9.0},
                   "initial": {"kind": "vmf", "centers": [[1, 0], [-1, 0.2]], "kappas": [6.0, 6.0]},
                   "time": {"t_final": 1.0, "outputs": 4}, "output": {"xdmf": False}},
                  out=tmp_path / "run", comm=MPI.COMM_SELF, quiet=True)
    assert main(["clusters", str(tmp_path / "run"), "--factors", "2,3", "--quiet"]) == 0
    with open(tmp_path / "run" / "clusters" / "crossings.csv") as fh:
        assert {float(row["factor"]) for row in csv.DictReader(fh)} == {2.0, 3.0}
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "clusters.csv").write_text("ok to overwrite: ours by name\n")
    (mine / "notes.txt").write_text("keep")
    assert main(["clusters", str(tmp_path / "run"), "--out", str(mine), "--quiet"]) == 2
    assert "not cluster tables" in capsys.readouterr().err
    assert (mine / "clusters.csv").read_text().startswith("ok to")


@pytest.mark.slow
def test_summary_agrees_with_its_table_through_the_cli(tmp_path, capsys):
    """``meanfield clusters`` of the s1-validation example: the global maximum is above 2x
    uniform at t = 0 and below 5x throughout, and the summary says so (it used to say "reaches
    no factor; not 2x, 5x ..."); crossings.csv says why a time is missing.  The summary is a few
    lines, the merges first: the per-output table is clusters.csv, not the terminal."""

    from helpers.cli import REPO
    from mpi4py import MPI

    import meanfield
    from meanfield.cli import main
    from meanfield.config import load_config

    config = load_config(REPO / "runs" / "examples" / "s1-validation.toml", ["mesh.resolution=256"])
    meanfield.run(config, out=tmp_path / "run", comm=MPI.COMM_SELF, quiet=True)  # what the command reads
    capsys.readouterr()
    assert main(["clusters", str(tmp_path / "run")]) == 0  # the CLI's main in this process: what it prints
    stdout = capsys.readouterr().out
    lines = stdout.splitlines()
    assert lines[1] == "  no merge"  # the merge line first: no per-output table before it
    assert "  clusters: 2 at t = 0 (each output's clusters: clusters.csv)" in lines and len(lines) <= 5
    with open(tmp_path / "run" / "clusters" / "clusters.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted({float(r["t"]) for r in rows}) == [0.0, 0.5, 1.0, 1.5, 2.0] and len(rows) == 2 * 5
    assert "global max: already above 2x at t = 0 (the first output); never reaches 5x, 10x, 20x, 50x by t = 2" \
        in stdout
    assert "merge    at" not in stdout and "vanished" not in stdout
    with open(tmp_path / "run" / "clusters" / "crossings.csv") as fh:
        rows = {r["factor"]: r for r in csv.DictReader(fh) if r["id"] == "max"}
    assert {f: (r["status"], r["time"]) for f, r in rows.items()} == {
        "2.0": ("already", ""), **{f: ("never", "") for f in ("5.0", "10.0", "20.0", "50.0")}}
