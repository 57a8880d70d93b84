"""The layout of a run directory: which files a run writes, how they are named, about how
large they grow and what reads them back.

Each file is declared once, as a :class:`RunFileSpec` in :data:`RUN_FILE_SPECS`: its name, what
it holds, the runs that write it, when it is written and its size (from the numbers of
:class:`RunSizes`), and its reader.  What a run directory owns (:func:`own_entries`: overwrites
and ``meanfield info``), ``meanfield check``'s list of files and their sizes
(:func:`estimated_sizes`) and the documentation's table of the run directory (the ``run-files``
directive) are all read from these declarations.

"Global order" is the cell order of the serial input mesh (and the token order of the
particle sampler), whatever the rank count.  Everything declared here is the program's own;
nothing else in a run directory is ever deleted or overwritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: The ``format`` entry of metadata.json that marks a directory as a meanfield run.
FORMAT = "meanfield-run"
FORMAT_VERSION = 3

CONFIG = "config.toml"
METADATA = "metadata.json"
OBSERVABLES = "observables.csv"
MESH = "mesh.npz"
WEIGHTS = "weights.npz"
SNAPSHOTS = "snapshots"
#: The snapshot entry holding the step controller's state (JSON: step statistics and the error
#: controller's proposed step), the ``step`` a checkpoint's info holds; absent before it was added.
STEPPER = "stepper"
CHECKPOINT = "checkpoint.npz"
#: The checkpoint before the last one, kept until the next is complete (see :mod:`.recovery`).
CHECKPOINT_PREVIOUS = "checkpoint.previous.npz"
LOG = "run.log"
LOCK = ".lock"
RUN_FILE = "run.nc"
PARAVIEW_CELLS = "density.xdmf"
PARAVIEW_DG1 = "density-dg1.xdmf"
PARAVIEW_ATOMS = "atoms.pvd"
PARAVIEW_SCRIPT = "view-in-paraview.py"
ATOM_POINTS = "atoms"
DIAGNOSTICS = "diagnostics.csv"
INNER_PRODUCTS = "inner_products.png"
#: The ParaView data of format-2 runs (before run.nc): still the program's own when present.
LEGACY_PARAVIEW_DATA = "density.h5"
#: Where the files of a run being overwritten wait until the new run's first checkpoint.
PREVIOUS = ".meanfield-previous"
#: Suffix of a snapshot's per-position observables of a causal run (``mean_0_by_position``).
BY_POSITION = "_by_position"
#: Suffix of a snapshot's per-prompt scalars of a batch of prompts (``energy_by_prompt``).
BY_PROMPT = "_by_prompt"
#: Bytes of one stored value (float64).
VALUE_BYTES = 8


@dataclass(frozen=True)
class RunSizes:
    """What the sizes of a PDE run's files depend on, as numbers (``meanfield check`` reads them
    off the problem: :mod:`meanfield.drivers.planning`).

    Attributes
    ----------
    cells
        Cells of the mesh.
    vertices_per_cell
        Vertices of a cell (2 on S^1, 3 on S^2).
    vertex_values
        The scheme's state holds each cell's vertex values (DG1).
    slices
        Densities per cell: a causal run's position slices, else 1.
    outputs
        The run's output times.
    paraview
        ``output.xdmf``: the ParaView files are written.
    atoms
        A hybrid run (``[atoms]``): the atoms are written too.
    weight_values
        Values of the drawn weights (``[model.random]``), ``None`` for weights in the config.
    """

    cells: int
    vertices_per_cell: int
    vertex_values: bool
    slices: int
    outputs: int
    paraview: bool = False
    atoms: bool = False
    weight_values: int | None = None

    @property
    def output_bytes(self) -> int:
        """One output's densities: every slice's cell averages (DG1: and vertex values)."""
        return VALUE_BYTES * self.cells * self.slices * (1 + (self.vertices_per_cell if self.vertex_values else 0))

    @property
    def state_bytes(self) -> int:
        """The run's state: every slice's cell averages (DG1: its vertex values)."""
        return VALUE_BYTES * self.cells * self.slices * (self.vertices_per_cell if self.vertex_values else 1)


def _always(sizes: RunSizes) -> bool:
    return True


def _small(sizes: RunSizes) -> int | None:
    return None


@dataclass(frozen=True)
class RunFileSpec:
    """One file (or folder of numbered files) of a run directory, declared once.

    Attributes
    ----------
    name
        Its name in the run directory (a folder's name for numbered files).
    holds
        What it holds, for people (the documentation's table of the run directory).
    reader
        What reads it back: the dotted name of a function, class or method (``meanfield.rundir.results.load_run``),
        or of a library function (``xarray.open_dataset``); ``None`` for files read by people and
        other programs (the log, ParaView's files).
    runs
        The run types that write it (``"pde"``, ``"particles"``; none: a former format's file, still
        the program's own).
    written
        Whether a PDE run of these sizes writes it.
    size
        Its size in bytes for a PDE run of these sizes (all outputs together for numbered files), ``None``
        where small (kilobytes).
    numbered
        For a folder of files numbered by output (``NNNN.npz``): the files' suffix (``.npz``).
    """

    name: str
    holds: str
    reader: str | None
    runs: tuple[str, ...] = ("pde", "particles")
    written: Callable[[RunSizes], bool] = _always
    size: Callable[[RunSizes], int | None] = _small
    numbered: str | None = None

    @property
    def shown(self) -> str:
        """Its name as people read it: ``snapshots/NNNN.npz`` for numbered files."""
        return self.name if self.numbered is None else f"{self.name}/NNNN{self.numbered}"

    @property
    def numbered_name(self) -> re.Pattern[str]:
        """The names of its numbered files (group 1: the output index)."""
        return re.compile(r"(\d{4,})" + re.escape(self.numbered or ""))


def _paraview(sizes: RunSizes) -> bool:
    return sizes.paraview


RUN_FILE_SPECS: tuple[RunFileSpec, ...] = (
    RunFileSpec(CONFIG, "the resolved config (every key with a value; a comment lists those left unset; arrays on one "
                "line, tables inside a section inline): rerun with ``meanfield run config.toml``",
                "meanfield.rundir.results.read_header"),
    RunFileSpec(METADATA, "format, kind, name (the run directory's), status (running/completed/interrupted/failed, "
                "error: where and why), versions (meanfield, dolfinx, PETSc, MPI, numpy, ducc0, h5netcdf...), "
                "ranks, threads, host, command, git revision, cells, scheme, evaluator (method, degree, error "
                "estimate), segments (the run and each resume: t_start, t_end, wall_s), t_reached, outputs "
                "written, timings, step statistics, stopped_early (t, reason: a callback ended the run), progress "
                "(t, step, dt, wall_s, eta_s, eta, updated: rewritten at every output); ``meanfield info RUN`` "
                "prints a summary of it", "meanfield.rundir.directory.read_metadata"),
    RunFileSpec(OBSERVABLES, "per output time: t, mass, mean vector and its norm (order), second moments, energy E "
                "(of the layer that brought the state there; nan without attention), rho_min, rho_max, dt, wall "
                "time, then the config's own observables ([[output.observables]], below)",
                "meanfield.rundir.files.read_csv_columns"),
    RunFileSpec(MESH, "PDE: sphere, vertices, cells (connectivity), centroids, areas (global order); DG1: vertex "
                "Jacobians", "meanfield.rundir.files.load_npz", runs=("pde",),
                size=lambda s: VALUE_BYTES * s.cells * (2 * s.vertices_per_cell + 2)),
    RunFileSpec(WEIGHTS, "runs of [model.random]: the drawn weights Q, K, V (layers, heads, d, d) and the "
                "feed-forward block's W, A, b (config.toml's model.random.weights names it)",
                "meanfield.rundir.files.load_npz", written=lambda s: s.weight_values is not None,
                size=lambda s: VALUE_BYTES * (s.weight_values or 0)),
    RunFileSpec(CHECKPOINT, "the state to resume from (written atomically at every output and every "
                "checkpoint_every s)", "meanfield.rundir.checkpoint.Checkpoint.load", size=lambda s: s.state_bytes),
    RunFileSpec(CHECKPOINT_PREVIOUS, "the checkpoint before it, kept in case the newest is damaged (\"Damaged run "
                "directories\")", "meanfield.rundir.checkpoint.Checkpoint.load", size=lambda s: s.state_bytes),
    RunFileSpec(LOG, "rank 0's log; hybrid runs: captures, merges, absorption, atoms on progress lines (long-time "
                "page)", None),
    RunFileSpec(SNAPSHOTS, "t and the solution at each output, global order (PDE: the density's cell averages, DG1 "
                "also its vertex densities, hybrid runs also atom_masses, atom_positions, atom_ids, causal runs one "
                "row per position slice and <observable>_by_position; particles: all tokens, a batch of prompts "
                "(B, n, d) and each prompt's scalars <observable>_by_prompt); stepper: the step controller's state "
                "(JSON), so that resume from a snapshot is exact; written atomically",
                "meanfield.rundir.files.load_npz", size=lambda s: s.outputs * s.output_bytes,
                numbered=".npz"),
    RunFileSpec(RUN_FILE, "every output in one netCDF4 file (CF-1.11 / UGRID-1.0: mesh, cell densities, DG1 vertex "
                "densities or tokens, observables along an unlimited time; the model's parameters as global "
                "attributes model_beta, model_Q, ...; see meanfield.rundir.netcdf)", "xarray.open_dataset",
                size=lambda s: s.outputs * s.output_bytes + VALUE_BYTES * s.cells * (8 + s.vertices_per_cell)),
    RunFileSpec(PARAVIEW_CELLS, "ParaView (output.xdmf): the cell densities over time, read from run.nc", None,
                runs=("pde",), written=_paraview),
    RunFileSpec(PARAVIEW_DG1, "ParaView (output.xdmf), DG1 runs: the vertex densities over time, read from run.nc",
                None, runs=("pde",), written=lambda s: s.paraview and s.vertex_values),
    RunFileSpec(PARAVIEW_ATOMS, "ParaView (output.xdmf), hybrid runs: the time series of the atoms' point clouds",
                None, runs=("pde",), written=lambda s: s.paraview and s.atoms),
    RunFileSpec(ATOM_POINTS, "ParaView (output.xdmf), hybrid runs: the atoms of each output as a VTK point cloud "
                "(mass, id)", None, runs=("pde",), written=lambda s: s.paraview and s.atoms,
                numbered=".vtu"),
    RunFileSpec(PARAVIEW_SCRIPT, "ParaView script (output.xdmf): the density (DG1: the vertex values) and the atoms "
                "as spheres (``paraview --script=...``)", None, runs=("pde",), written=_paraview),
    RunFileSpec(DIAGNOSTICS, "particle runs: t, clusters, largest_cluster, largest_cluster_error, rule, "
                "tokens_analysed", "meanfield.rundir.files.read_csv_columns", runs=("particles",)),
    RunFileSpec(INNER_PRODUCTS, "particle runs: the histogram of <x_i, x_j> over time and the cluster count", None,
                runs=("particles",)),
    RunFileSpec(LEGACY_PARAVIEW_DATA, "format-2 runs (before run.nc): the ParaView data", None, runs=()),
)

#: Plain files a run may write at the top of its directory.
RUN_FILES: tuple[str, ...] = tuple(spec.name for spec in RUN_FILE_SPECS if spec.numbered is None)
#: Folders of numbered files a run writes, and the files' names.
NUMBERED: dict[str, re.Pattern[str]] = {spec.name: spec.numbered_name for spec in RUN_FILE_SPECS
                                        if spec.numbered is not None}
#: Temporary files of atomic writes (see :func:`meanfield.rundir.files.atomic_write`), left by a crash.
TEMPORARY_NAME = re.compile(r"\..+\.tmp-\d+")


def estimated_sizes(sizes: RunSizes) -> dict[str, int | None]:
    """The files a PDE run of ``sizes`` writes, in declaration order, with their estimated
    sizes in bytes (8-byte values, no overhead; ``None`` where small); numbered files as
    ``snapshots/NNNN.npz x 5``."""
    return {spec.shown + (f" x {sizes.outputs}" if spec.numbered is not None else ""): spec.size(sizes)
            for spec in RUN_FILE_SPECS if "pde" in spec.runs and spec.written(sizes)}


def snapshot_path(run_dir: Path, index: int) -> Path:
    """``run_dir/snapshots/NNNN.npz`` for output ``index``."""
    return Path(run_dir) / SNAPSHOTS / f"{index:04d}.npz"


def _numbered(folder: Path, name: re.Pattern) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := name.fullmatch(p.name)))


def snapshot_files(run_dir: Path) -> list[tuple[int, Path]]:
    """The snapshot files a run wrote, as (output index, path), in output order."""
    return _numbered(Path(run_dir) / SNAPSHOTS, NUMBERED[SNAPSHOTS])


def atom_point_path(run_dir: Path, index: int) -> Path:
    """``run_dir/atoms/NNNN.vtu``: the atoms of output ``index`` for ParaView."""
    return Path(run_dir) / ATOM_POINTS / f"{index:04d}.vtu"


def atom_point_files(run_dir: Path) -> list[tuple[int, Path]]:
    """The atom point files (ParaView) a run wrote, as (output index, path), in output order."""
    return _numbered(Path(run_dir) / ATOM_POINTS, NUMBERED[ATOM_POINTS])


def temporary_files(run_dir: Path) -> list[Path]:
    """Temporary files of interrupted atomic writes in ``run_dir`` and its folders of numbered files."""
    folders = [Path(run_dir), *(Path(run_dir) / name for name in NUMBERED)]
    return [p for f in folders if f.is_dir() for p in f.iterdir() if p.is_file() and TEMPORARY_NAME.fullmatch(p.name)]


def own_entries(run_dir: Path) -> list[Path]:
    """The files in ``run_dir`` that a run writes (those present): snapshots and temporary files included."""
    run_dir = Path(run_dir)
    entries = [run_dir / name for name in RUN_FILES if (run_dir / name).is_file()]
    entries += [p for name, numbered in NUMBERED.items() for _, p in _numbered(run_dir / name, numbered)]
    return entries + temporary_files(run_dir)
