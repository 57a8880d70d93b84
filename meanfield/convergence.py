"""Convergence studies: a ladder of runs, errors of the density and observables, observed orders.

A ladder runs one config at nested mesh levels (S^2: icosphere level L; S^1: 2**L
segments), or, with ``dt_ladder``, at one mesh with the fixed step ``time.dt / 2**L``.  Each
run uses all ranks and writes a normal run directory ``OUT/level<L>``; the errors are then
computed on rank 0 from the run directories (global cell order, so any rank count gives the
same numbers).

Density errors (cell averages, norms weighted by the cell measures; ``max`` over cells) at
every output time, against

``exact``
    the exact solution where the case has one: solid-body rotation (the rotated initial
    density), the uniform steady state, and the linear regime of a small harmonic
    perturbation of the uniform state with Q = K = V = I (``rho = 1/|S| + a e^{gamma_l t}
    Y_l``, gamma_l from MODEL.md); exact cell averages use the degree-4 rule of
    :mod:`.discretisation.quadrature` on the raw mesh;
``finest``
    the finest run of the ladder (self-convergence);
``RUN_DIR``
    a run directory at a finer nested level (or, for a dt ladder, the same mesh).

Finer solutions reach coarser meshes by the conservative transfer of nested meshes: the
children of cell c of an S^2 level with n cells are c, c + n, c + 2n, c + 3n at the next
level (:func:`meanfield.mesh.icosphere`), those of S^1 segment c are 2c and 2c + 1, and the
parent's average is the measure-weighted mean of its children's.

Observed orders: against ``exact`` or a ``RUN_DIR``, ``log(e_{L-1} / e_L) / log(h_{L-1} / h_L)``
on row L; against ``finest``, the Richardson estimate from three consecutive levels,
``log(d_L / d_{L+1}) / log(h_L / h_{L+1})`` with ``d_L = ||u_L - u_{L+1}||``, on row L.  The
observables ``energy`` and ``moments`` (largest error of the mean vector and second-moment
entries) are always treated by self-convergence (finest or RUN_DIR), since their exact values
are not known in closed form.

Outputs: ``convergence.csv`` (level, cells, h, dt, norm, time, error, order) and
``convergence.png`` (errors at the final time against h or dt, log-log, reference slopes).
"""

from __future__ import annotations

import copy
import csv
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Callable

import numpy as np
from scipy import special

from .collective import on_root
from .config import Config, load_config
from .initial import real_harmonic, sphere_area
from .io import RunResult, load_run
from .mesh import raw_mesh

DENSITY_NORMS = ("L1", "L2", "max")
OBSERVABLE_NORMS = ("energy", "moments")


class ConvergenceError(ValueError):
    """A study that cannot be done as asked (no exact solution, a non-nested reference, ...)."""


@dataclass(frozen=True)
class Row:
    """One line of convergence.csv."""

    level: int
    cells: int
    h: float
    dt: float
    norm: str
    time: float
    error: float
    order: float


def parse_levels(text: str) -> list[int]:
    """``"3:6"`` -> [3, 4, 5, 6] (inclusive); ``"3,5"`` -> [3, 5]."""
    try:
        if ":" in text:
            lo, hi = (int(v) for v in text.split(":"))
            levels = list(range(lo, hi + 1))
        else:
            levels = [int(v) for v in text.split(",")]
    except ValueError:
        raise ConvergenceError(f"--levels: expected FIRST:LAST or a comma list, got {text!r}") from None
    if len(levels) < 2 or levels != sorted(set(levels)) or levels[0] < 0:
        raise ConvergenceError(f"--levels: need at least two increasing levels >= 0, got {text!r}")
    return levels


def resolution(sphere: str, level: int) -> int:
    """The ``mesh.resolution`` of a ladder level (S^2: the level, S^1: 2**level cells)."""
    return level if sphere == "S2" else 2**level


def level_of(sphere: str, cells: int) -> int:
    """Inverse of the cell count of a ladder level."""
    level = round(np.log(cells / 20.0) / np.log(4.0)) if sphere == "S2" else round(np.log2(cells))
    if (20 * 4**level if sphere == "S2" else 2**level) != cells:
        raise ConvergenceError(f"{cells} cells is not a nested {sphere} ladder level")
    return int(level)


def mesh_width(sphere: str, cells: int) -> float:
    """h = sqrt(|S^2| / cells) on S^2, 2 pi / cells on S^1."""
    return float(np.sqrt(4.0 * np.pi / cells)) if sphere == "S2" else 2.0 * np.pi / cells


def coarsen(values: np.ndarray, areas: np.ndarray, sphere: str, times: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Conservative transfer of cell averages ``times`` levels down the nested ladder.

    Parameters
    ----------
    values
        (T, cells) cell averages in global order.
    areas
        (cells,) cell measures.

    Returns
    -------
    values, areas
        The parents' averages (T, cells / 4**times or / 2**times) and measures.
    """
    for _ in range(times):
        mass = values * areas
        if sphere == "S2":
            n = areas.size // 4
            mass, areas = mass.reshape(-1, 4, n).sum(axis=1), areas.reshape(4, n).sum(axis=0)
        else:
            mass, areas = mass.reshape(-1, areas.size // 2, 2).sum(axis=2), areas.reshape(-1, 2).sum(axis=1)
        values = mass / areas
    return values, areas


def _identity_model(config: Config) -> bool:
    m = config.section("model")
    if m["heads"] is not None:
        return False
    eye = np.eye(config.d).tolist()
    return all(m[key] is None or np.allclose(m[key], eye) for key in ("Q", "K", "V"))


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix by ``angle`` about ``axis`` (Rodrigues)."""
    a = axis / np.linalg.norm(axis)
    cross = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    return np.eye(3) + np.sin(angle) * cross + (1.0 - np.cos(angle)) * cross @ cross


def growth_rate(d: int, degree: int, beta: float, softmax: bool) -> float:
    """gamma_l of MODEL.md for the mode of ``degree`` (Q = K = V = I)."""
    if d == 2:
        lam, lam0 = special.ive(degree, beta), special.ive(0, beta)  # common factor 2 pi e^beta cancels
        area_term = lam0 if softmax else np.exp(-beta)
        return float(degree**2 * lam / (beta * area_term))
    lam, lam0 = special.spherical_in(degree, beta), special.spherical_in(0, beta)
    return float(degree * (degree + 1) * lam / (beta * (lam0 if softmax else 1.0)))


def exact_solution(config: Config) -> Callable[[float, np.ndarray], np.ndarray] | None:
    """The exact density ``(t, points) -> values`` of the config's case, or ``None``."""
    m, init = config.section("model"), config.section("initial")
    d = config.d
    rho0 = config.initial_density()
    if m["velocity"] == "rotation":
        if d == 2:
            def rotated(t: float, x: np.ndarray) -> np.ndarray:
                c, s = np.cos(m["rotation_rate"] * t), np.sin(m["rotation_rate"] * t)
                return rho0(x @ np.array([[c, -s], [s, c]]))  # rows: R(-omega t) x
            return rotated
        axis = np.asarray(m["rotation_axis"], float)
        return lambda t, x: rho0(x @ _rotation(axis, m["rotation_rate"] * t))
    if not _identity_model(config):
        return None
    if init["kind"] == "uniform":
        return lambda t, x: np.full(len(x), 1.0 / sphere_area(d))
    if init["kind"] == "harmonic":
        degree = int(init.get("degree", 1))  # the defaults of meanfield.initial
        gamma = growth_rate(d, degree, m["beta"], m["attention"] == "softmax")
        order, phase = int(init.get("order", 0) or 0), float(init.get("phase", 0.0) or 0.0)
        amplitude = float(init.get("amplitude", 0.01))

        def linear(t: float, x: np.ndarray) -> np.ndarray:
            y = real_harmonic(x, degree, order, phase)
            return 1.0 / sphere_area(d) + amplitude * np.exp(gamma * t) * y
        return linear
    return None


def exact_cell_averages(exact, sphere: str, cells: int, times: np.ndarray) -> np.ndarray:
    """(T, cells) cell averages of the exact solution on a ladder mesh, global order."""
    from .discretisation.quadrature import cell_averages

    raw = raw_mesh(sphere, resolution(sphere, level_of(sphere, cells)))
    vertices = raw.points[raw.cells]
    return np.array([cell_averages(lambda x: exact(t, x), vertices)[1] for t in times])


def density_norms(error: np.ndarray, areas: np.ndarray) -> dict[str, np.ndarray]:
    """L1, L2 (measure-weighted) and max norms of (T, cells) errors, per time."""
    return {"L1": np.abs(error) @ areas, "L2": np.sqrt(error**2 @ areas), "max": np.abs(error).max(axis=1)}


def observable_errors(run: RunResult, ref: RunResult) -> dict[str, np.ndarray]:
    """Errors of the energy and of the moments (largest entry) per output time."""
    keys = [k for k in run.observables if k.startswith(("mean_", "m2_"))]
    moments = np.max([np.abs(run.observables[k] - ref.observables[k]) for k in keys], axis=0)
    return {"energy": np.abs(run.observables["energy"] - ref.observables["energy"]), "moments": moments}


def _orders(errors: list[np.ndarray], widths: list[float]) -> list[np.ndarray]:
    """log(e_{i-1} / e_i) / log(h_{i-1} / h_i) per entry i (NaN for the first)."""
    out = [np.full_like(errors[0], np.nan)]
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(1, len(errors)):
            out.append(np.log(errors[i - 1] / errors[i]) / np.log(widths[i - 1] / widths[i]))
    return out


def _richardson(differences: list[np.ndarray], widths: list[float]) -> list[np.ndarray]:
    """Richardson orders log(d_i / d_{i+1}) / log(h_i / h_{i+1}) (NaN where i + 1 is missing)."""
    return _orders(differences, widths)[1:] + [np.full_like(differences[0], np.nan)]


@dataclass
class Ladder:
    """The runs of a study and what each was run with."""

    config: Config
    levels: list[int]
    runs: list[RunResult]
    dt_ladder: bool

    @property
    def sphere(self) -> str:
        return self.config.section("mesh")["sphere"]

    def cells(self, i: int) -> int:
        return len(self.runs[i].areas)

    def step(self, i: int) -> float:
        run = self.runs[i]
        fixed = run.config.get("time", {}).get("dt")
        return float(fixed) if fixed else float(run.times[-1] / max(run.metadata["steps"]["steps"], 1))

    def width(self, i: int) -> float:
        return self.step(i) if self.dt_ladder else mesh_width(self.sphere, self.cells(i))

    def transfer(self, ref: RunResult, i: int) -> np.ndarray:
        """A finer run's densities on the mesh of run i."""
        if self.dt_ladder:
            return ref.densities
        steps = level_of(self.sphere, len(ref.areas)) - level_of(self.sphere, self.cells(i))
        if steps < 0:
            raise ConvergenceError(f"the reference {ref.path} is coarser than level {self.levels[i]}")
        return coarsen(ref.densities, ref.areas, self.sphere, steps)[0]


def level_config(config: Config, level: int, dt_ladder: bool, out: Path) -> Config:
    """The config of one ladder level (mesh resolution or fixed step, run directory)."""
    data = copy.deepcopy(config.data)
    if dt_ladder:
        if data["time"]["dt"] is None:
            raise ConvergenceError("--dt-ladder: set time.dt (the step of level 0) in the config")
        data["time"]["dt"] = data["time"]["dt"] / 2**level
    else:
        data["mesh"]["resolution"], data["mesh"]["file"] = resolution(data["mesh"]["sphere"], level), None
    data["output"]["dir"] = str(out / f"level{level}")
    data["name"] = f"{config.name}-level{level}"
    return Config(data, config.source)


def run_ladder(config: Config, levels: list[int], out: Path, dt_ladder: bool = False, comm=None, quiet: bool = True) -> Ladder:
    """Run every level (each on all ranks of ``comm``) and read the runs back."""
    from .solver import run

    runs = []
    for level in levels:
        cfg = level_config(config, level, dt_ladder, Path(out))
        runs.append(run(cfg, out=cfg.section("output")["dir"], comm=comm, quiet=quiet))
    return Ladder(config, levels, runs, dt_ladder)


def check_reference(config: Config, reference: str | Path, dt_ladder: bool) -> None:
    """Raise :class:`ConvergenceError` unless ``reference`` can be used for this study."""
    if reference not in ("exact", "finest") and not (Path(reference) / "metadata.json").is_file():
        raise ConvergenceError(f"--reference: {reference} is not 'exact', 'finest' or a run directory")
    if reference == "exact" and dt_ladder:
        raise ConvergenceError("--reference exact: a dt ladder is measured against its finest run (--reference finest)")
    if reference == "exact" and exact_solution(config) is None:
        raise ConvergenceError("--reference exact: this case has no exact solution "
                               "(rotation, uniform, or harmonic with Q = K = V = I); use --reference finest")


def error_rows(ladder: Ladder, reference: str | Path = "finest") -> list[Row]:
    """The rows of convergence.csv for a finished ladder (serial; any rank)."""
    check_reference(ladder.config, reference, ladder.dt_ladder)
    times = ladder.runs[0].times
    for run in ladder.runs:
        if run.times.shape != times.shape or not np.allclose(run.times, times):
            raise ConvergenceError(f"{run.path}: output times differ from the other levels'")
    n = len(ladder.runs)
    widths = [ladder.width(i) for i in range(n)]
    rows: list[Row] = []

    def emit(i: int, errors: dict[str, np.ndarray], orders: dict[str, np.ndarray]) -> None:
        for norm, err in errors.items():
            for k, t in enumerate(times):
                rows.append(Row(ladder.levels[i], ladder.cells(i), mesh_width(ladder.sphere, ladder.cells(i)),
                                ladder.step(i), norm, float(t), float(err[k]), float(orders[norm][i][k])))

    def against_reference(errors: list[dict[str, np.ndarray]]) -> None:
        """Errors against a fixed reference; orders from consecutive levels."""
        orders = {k: _orders([e[k] for e in errors], widths) for k in errors[0]}
        for i in range(n):
            emit(i, errors[i], orders)

    def self_convergence(diff: Callable[[int, int], dict[str, np.ndarray]]) -> None:
        """Errors against the finest run; Richardson orders from consecutive differences."""
        consecutive = [diff(i, i + 1) for i in range(n - 1)]
        orders = {k: _richardson([c[k] for c in consecutive], widths[: n - 1]) for k in consecutive[0]}
        for i in range(n - 1):
            emit(i, diff(i, n - 1), orders)

    def density_diff(i: int, ref: RunResult) -> dict[str, np.ndarray]:
        run = ladder.runs[i]
        return density_norms(run.densities - ladder.transfer(ref, i), run.areas)

    if reference == "exact":
        exact = exact_solution(ladder.config)
        errors = []
        for i, run in enumerate(ladder.runs):
            ref = exact_cell_averages(exact, ladder.sphere, ladder.cells(i), times)
            ref /= ref[0] @ run.areas  # the runs normalise the discrete mass to 1
            errors.append(density_norms(run.densities - ref, run.areas))
        against_reference(errors)
    elif reference == "finest":
        self_convergence(lambda i, j: density_diff(i, ladder.runs[j]))
    else:
        reference_run = load_run(reference)
        against_reference([density_diff(i, reference_run) for i in range(n)])

    if reference in ("exact", "finest"):  # observables: no exact values, self-convergence
        self_convergence(lambda i, j: observable_errors(ladder.runs[i], ladder.runs[j]))
    else:
        against_reference([observable_errors(run, reference_run) for run in ladder.runs])
    return rows


def write_csv(rows: list[Row], path: Path) -> None:
    """convergence.csv, one row per level, norm and output time."""
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow([f.name for f in fields(Row)])
        for row in rows:
            writer.writerow([repr(v) if isinstance(v, float) else v for v in astuple(row)])


def read_csv(path: Path) -> list[Row]:
    """Rows of a convergence.csv."""
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        return [Row(int(r["level"]), int(r["cells"]), float(r["h"]), float(r["dt"]), r["norm"], float(r["time"]),
                    float(r["error"]), float(r["order"])) for r in reader]


def final_rows(rows: list[Row]) -> list[Row]:
    """The rows at the last output time."""
    t_end = max(r.time for r in rows)
    return [r for r in rows if r.time == t_end]


def format_table(rows: list[Row]) -> str:
    """The final-time rows as a text table."""
    lines = [f"{'level':>5} {'cells':>8} {'h':>10} {'dt':>10} {'norm':>8} {'time':>8} {'error':>11} {'order':>6}"]
    for r in final_rows(rows):
        order = "" if np.isnan(r.order) else f"{r.order:6.2f}"
        lines.append(f"{r.level:5d} {r.cells:8d} {r.h:10.4g} {r.dt:10.4g} {r.norm:>8} {r.time:8.4g} {r.error:11.4e} {order:>6}")
    return "\n".join(lines)


def plot(rows: list[Row], path: Path, dt_ladder: bool = False) -> None:
    """Log-log errors at the final time against h (or dt), with reference slopes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    final = final_rows(rows)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, norms in zip(axes, (DENSITY_NORMS, OBSERVABLE_NORMS)):
        xs_all = []
        for norm in norms:
            sel = [r for r in final if r.norm == norm and r.error > 0]
            if sel:
                xs = np.array([r.dt if dt_ladder else r.h for r in sel])
                ax.loglog(xs, [r.error for r in sel], "o-", label=norm)
                xs_all.append((xs, sel[-1].error))
        if xs_all:
            xs, anchor = xs_all[0]
            for slope in (1, 2, 3) if dt_ladder else (1, 2):
                ax.loglog(xs, anchor * (xs / xs[-1]) ** slope, "k--", lw=0.8, alpha=0.3 + 0.2 * slope)
                ax.annotate(f"slope {slope}", (xs[0], anchor * (xs[0] / xs[-1]) ** slope), fontsize=8)
        ax.set_xlabel("dt" if dt_ladder else "h")
        ax.set_ylabel("error at t = %.3g" % final[0].time if final else "error")
        ax.set_title("density" if norms is DENSITY_NORMS else "observables")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def convergence_study(
    config: Config | str | Path | None,
    levels: list[int],
    out: str | Path,
    *,
    reference: str | Path = "exact",
    dt_ladder: bool = False,
    overrides: list[str] | None = None,
    comm=None,
    quiet: bool = True,
) -> list[Row]:
    """Run a ladder and write convergence.csv and convergence.png into ``out`` (collective).

    Parameters
    ----------
    config
        The case (a Config, a TOML path, or ``None`` for the default).
    levels
        Ladder levels (S^2: icosphere levels; S^1: 2**level cells; dt ladder: dt / 2**level).
    out
        Directory of the runs and the study's files.
    reference
        ``"exact"``, ``"finest"`` or a run directory.
    dt_ladder
        Halve the fixed ``time.dt`` instead of refining the mesh.
    comm
        Communicator of the runs (default COMM_WORLD).

    Returns
    -------
    list[Row]
        The rows of convergence.csv, on every rank.
    """
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    if not isinstance(config, Config):
        config = load_config(config, overrides)
    out = Path(out)
    check_reference(config, reference, dt_ladder)
    ladder = run_ladder(config, levels, out, dt_ladder, comm, quiet)
    def report() -> list[Row]:
        rows = error_rows(ladder, reference)
        write_csv(rows, out / "convergence.csv")
        plot(rows, out / "convergence.png", dt_ladder)
        return rows

    return on_root(comm, report, ConvergenceError)
