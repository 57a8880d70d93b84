"""The layout of a run directory: which files a run writes, and how they are named.

::

    config.toml          the resolved config: `meanfield run config.toml` reruns it
    metadata.json        format, kind, status, error, versions, ranks, timings, step statistics,
                         solver facts, the last checkpoint, and one entry per segment (run, resume)
    observables.csv      one row per output time (mass, moments, energy, rho_min, rho_max, dt, wall)
    weights.npz          runs of [model.random]: the drawn weights Q, K, V (layers, heads, d, d) and the
                         feed-forward block's W, A, b (config.toml's model.random.weights names it)
    mesh.npz             PDE: sphere, vertices, cells (connectivity), centroids, areas (global order)
    snapshots/NNNN.npz   output NNNN: t and the solution (PDE: cell averages, DG1 also its whole
                         state, hybrid runs also the atoms (meanfield.point_masses.ATOM_KEYS), causal runs
                         one row per position slice and <observable>_by_position (BY_POSITION);
                         particles: all tokens, a batch of prompts (B, n, d) and each prompt's
                         scalars <observable>_by_prompt (BY_PROMPT)), global order; and the step controller's
                         state at that output (STEPPER, JSON), so that a run resumes from it
                         exactly; written atomically
    checkpoint.npz       the whole state at the last checkpoint (written atomically)
    run.nc               every output in one netCDF4 file (xarray.open_dataset opens it; see
                         meanfield.rundir.netcdf): mesh, coordinates, densities or tokens, observables
    density.xdmf, density-dg1.xdmf
                         ParaView files over run.nc's datasets when output.xdmf is on (DG1: both)
    atoms.pvd, atoms/NNNN.vtu
                         hybrid runs with output.xdmf on: the atoms of output NNNN as a VTK
                         point cloud (mass, id), and ParaView's time series of them
    view-in-paraview.py  with output.xdmf on: a ParaView script that opens the density (DG1: the
                         vertex values) and the atoms as spheres (`paraview --script=...`)
    diagnostics.csv, inner_products.png
                         particle runs: cluster counts and pairwise inner products
    run.log              rank 0's log
    .lock                held by the running process (released when it ends, however it ends)

"Global order" is the cell order of the serial input mesh (and the token order of the
particle sampler), whatever the rank count.  Everything listed here is the program's own;
nothing else in a run directory is ever deleted or overwritten.
"""

from __future__ import annotations

import re
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

#: Plain files a run may write at the top of its directory.
RUN_FILES: tuple[str, ...] = (CONFIG, METADATA, OBSERVABLES, MESH, WEIGHTS, CHECKPOINT, CHECKPOINT_PREVIOUS, LOG,
                              RUN_FILE, PARAVIEW_CELLS, PARAVIEW_DG1, PARAVIEW_ATOMS, PARAVIEW_SCRIPT, DIAGNOSTICS,
                              INNER_PRODUCTS,
                              LEGACY_PARAVIEW_DATA)
SNAPSHOT_NAME = re.compile(r"(\d{4,})\.npz")
ATOM_POINTS_NAME = re.compile(r"(\d{4,})\.vtu")
#: Temporary files of atomic writes (see :func:`meanfield.rundir.files.atomic_write`), left by a crash.
TEMPORARY_NAME = re.compile(r"\..+\.tmp-\d+")


def snapshot_path(run_dir: Path, index: int) -> Path:
    """``run_dir/snapshots/NNNN.npz`` for output ``index``."""
    return Path(run_dir) / SNAPSHOTS / f"{index:04d}.npz"


def _numbered(folder: Path, name: re.Pattern) -> list[tuple[int, Path]]:
    if not folder.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := name.fullmatch(p.name)))


def snapshot_files(run_dir: Path) -> list[tuple[int, Path]]:
    """The snapshot files a run wrote, as (output index, path), in output order."""
    return _numbered(Path(run_dir) / SNAPSHOTS, SNAPSHOT_NAME)


def atom_point_path(run_dir: Path, index: int) -> Path:
    """``run_dir/atoms/NNNN.vtu``: the atoms of output ``index`` for ParaView."""
    return Path(run_dir) / ATOM_POINTS / f"{index:04d}.vtu"


def atom_point_files(run_dir: Path) -> list[tuple[int, Path]]:
    """The atom point files (ParaView) a run wrote, as (output index, path), in output order."""
    return _numbered(Path(run_dir) / ATOM_POINTS, ATOM_POINTS_NAME)


def temporary_files(run_dir: Path) -> list[Path]:
    """Temporary files of interrupted atomic writes in ``run_dir`` and its snapshots and atoms folders."""
    folders = [Path(run_dir), Path(run_dir) / SNAPSHOTS, Path(run_dir) / ATOM_POINTS]
    return [p for f in folders if f.is_dir() for p in f.iterdir() if p.is_file() and TEMPORARY_NAME.fullmatch(p.name)]


def own_entries(run_dir: Path) -> list[Path]:
    """The files in ``run_dir`` that a run writes (those present): snapshots and temporary files included."""
    run_dir = Path(run_dir)
    entries = [run_dir / name for name in RUN_FILES if (run_dir / name).is_file()]
    entries += [p for _, p in snapshot_files(run_dir)] + [p for _, p in atom_point_files(run_dir)]
    return entries + temporary_files(run_dir)
