"""Many runs in one table (``meanfield collect``): the observables with the parameters as columns.

The runs are found in the paths given: a run directory is itself, a sweep directory gives
its points in order (:mod:`meanfield.studies.grid`), any other directory the runs anywhere
below it (a convergence or validation study, a folder of runs).  The table is in long
format, one row per run and output time (``final``: one row per run, its last output)::

    run, kind, status, <parameters>, t, mass, order, energy, ..., rho_max, dt, wall

The parameters are the sweeps' grid keys and every config key whose value differs between
the runs (``model.beta``, ``particles.seed``, ...; arrays and tables as JSON text).  As a
netCDF file it is an xarray Dataset with dimensions ``(run, time)`` (``final``: ``(run,)``),
the parameters, kinds and statuses as coordinates along ``run``; on a full grid
``ds.set_index(run=["model.beta", "mesh.resolution"]).unstack("run")`` gives one dimension
per parameter.

With ``clusters`` the table also has each run's ``formation_time`` (a run column) and the
number of ``clusters`` at each output (:mod:`.phase`).

With ``densities`` (netCDF only, one row per run) the Dataset also holds every run's final
density, ``density(run, cell)``, with the cells' centroids and areas: the runs must be PDE runs
on one mesh (a sweep of model parameters, seeds, schemes); a causal run's is the density of its
whole token distribution (the mean over its positions), so sweeps over ``positions.slices``
collect too::

    ds = xarray.open_dataset("final.nc")
    ds.density.sel(run=ds.run[ds["model.beta"] == 4])      # the final densities at beta = 4
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import ConfigError
from ..rundir.directory import check_creatable, effective_status, is_run
from ..rundir.files import write_text
from ..rundir.netcdf import observable_attributes
from ..rundir.results import observables_frame, read_observables
from ..rundir.sweeps import sweep_points
from ..version import __version__
from .phase import ATTRIBUTES

if TYPE_CHECKING:
    import pandas
    import xarray

#: The columns that describe a run rather than an output.
RUN_COLUMNS = ("run", "kind", "status")
FORMATS = (".csv", ".nc")


def find_runs(paths: Sequence[str | Path]) -> list[tuple[Path, dict[str, Any]]]:
    """The run directories in ``paths`` (module docstring), each with its sweep parameters ({} if none).

    Raises
    ------
    FileNotFoundError
        A path that does not exist, or paths without any run.
    """
    found: dict[Path, tuple[Path, dict[str, Any]]] = {}  # resolved path -> (path as given, parameters)
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: no such directory")
        points = sweep_points(path)
        run_dirs: list[tuple[Path, dict[str, Any]]]
        if is_run(path):
            run_dirs = [(path, {})]
        elif points is not None:
            run_dirs = [(path / p.directory, p.parameters) for p in points if is_run(path / p.directory)]
        else:
            run_dirs = [(run_dir, {}) for run_dir in _runs_below(path)]
        for run_dir, parameters in run_dirs:
            found.setdefault(run_dir.resolve(), (run_dir, parameters))
    if not found:
        raise FileNotFoundError(f"{', '.join(map(str, paths))}: no meanfield runs found")
    return list(found.values())


def _runs_below(path: Path) -> list[Path]:
    run_dirs = []
    for child in sorted(p for p in path.iterdir() if p.is_dir()):
        if is_run(child):
            run_dirs.append(child)
        else:
            run_dirs.extend(_runs_below(child))
    return run_dirs


def _flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"model": {"beta": 4}}`` -> ``{"model.beta": 4}`` (arrays and tables of values as JSON text)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value if isinstance(value, (bool, int, float, str)) else json.dumps(value)
    return out


def _parameters(configs: list[dict[str, Any]], sweeps: list[dict[str, Any]]) -> list[str]:
    """The sweeps' keys (in their order), then the other keys whose values differ, sorted."""
    keys = list(dict.fromkeys(k for params in sweeps for k in params))
    every = set().union(*configs)
    differ = sorted(k for k in every - set(keys)
                    if len({json.dumps(c.get(k), sort_keys=True) for c in configs}) > 1)
    return keys + differ


def collect(paths: Sequence[str | Path], *, final: bool = False, clusters: bool = False) -> pandas.DataFrame:
    """The observables of the runs in ``paths`` as one long table (module docstring).

    Parameters
    ----------
    paths
        Run directories, sweep directories, or folders holding runs.
    final
        Only the last output of each run (one row per run; NaN for a run without outputs).
    clusters
        Also ``formation_time`` and ``clusters`` (:func:`.phase.with_clusters`).

    Returns
    -------
    pandas.DataFrame
        Columns ``run``, ``kind``, ``status``, the parameters, ``t`` and the observables.
    """
    import pandas as pd

    run_dirs = find_runs(paths)
    read = [read_observables(path) for path, _ in run_dirs]
    configs = [_flat(header.config) for header, _ in read]
    keys = _parameters(configs, [params for _, params in run_dirs])
    frames = []
    for (path, _), (header, observables), config in zip(run_dirs, read, configs):
        frame = observables_frame(observables)
        frame = frame.tail(1) if final else frame
        if final and frame.empty:
            frame = pd.DataFrame({"t": [np.nan]})
        described = {"run": str(path), "kind": header.metadata.get("kind"),
                     "status": effective_status(path, header.metadata), **{k: config.get(k) for k in keys}}
        frames.append(frame.assign(**described)[[*described, *frame.columns]])
    table = pd.concat(frames, ignore_index=True)
    if clusters:
        from .phase import with_clusters

        table = with_clusters(table)
    return table


def to_dataset(table: pandas.DataFrame, *, final: bool = False) -> xarray.Dataset:
    """A :func:`collect` table as a Dataset: dims ``(run, time)`` (``final``: ``(run,)``), the
    parameters, kinds and statuses as coordinates along ``run``."""
    import pandas as pd

    observables = [c for c in table.columns if c not in (*_described(table), "t")]
    described = table.groupby("run", sort=False)[list(_described(table))[1:]].first()
    if final:
        ds = table.set_index("run")[["t", *observables]].to_xarray()
    else:
        ds = table.set_index(["run", "t"])[observables].to_xarray().rename(t="time")
        ds = ds.reindex(run=described.index)
        ds["time"].attrs.update(long_name="model time t", units="1")
    for name in observables:
        ds[name].attrs.update(observable_attributes(name, None) or ATTRIBUTES.get(name, {}))
        if pd.api.types.is_integer_dtype(table[name].dtype):  # counts: integers in the file, -1 where missing
            ds[name] = ds[name].astype(float)
            ds[name].encoding.update(dtype="int32", _FillValue=-1)
    for name, column in described.items():
        values = column.to_numpy()
        values = values.astype(str) if values.dtype == object else values
        ds = ds.assign_coords({str(name): ("run", values, {"long_name": _column_meaning(str(name))})})
    ds.attrs.update(Conventions="CF-1.11", title="meanfield collect: observables of many runs",
                    source=f"meanfield {__version__}")
    return ds


def _described(table: pandas.DataFrame) -> list[str]:
    """``run``, ``kind``, ``status`` and the parameter columns (all before ``t``)."""
    return list(table.columns[: list(table.columns).index("t")])


def parameters(table: pandas.DataFrame) -> list[str]:
    """The parameter columns of a :func:`collect` table (the swept keys first)."""
    return [c for c in _described(table) if c not in (*RUN_COLUMNS, *ATTRIBUTES)]


def _column_meaning(name: str) -> str:
    known = {"kind": "pde or particles", "status": "the run's status", **{k: v["long_name"]
                                                                        for k, v in ATTRIBUTES.items()}}
    return known.get(name, f"config value {name}")


def check_table_output(out: str | Path, *, overwrite: bool = False) -> Path:
    """Refuse a table file :func:`write_table` may not write (ConfigError naming ``-o``); nothing is written."""
    out = Path(out)
    if out.suffix not in FORMATS:
        raise ConfigError(f"-o {out}: must end in {' or '.join(FORMATS)} (CSV table or netCDF Dataset)")
    if out.exists() and not overwrite:
        raise ConfigError(f"-o {out}: the file exists; pass --overwrite to replace it")
    if not out.parent.is_dir():
        raise ConfigError(f"-o {out}: the folder {out.parent} does not exist")
    if not out.exists():
        check_creatable(out, "-o")
    return out


def check_densities_output(out: str | Path) -> None:
    """Refuse ``--densities`` with a table that is not netCDF (ConfigError naming the options)."""
    if Path(out).suffix != ".nc":
        raise ConfigError(f"--densities: needs -o TABLE.nc (a netCDF Dataset), got -o {out}")


def with_densities(ds: xarray.Dataset) -> xarray.Dataset:
    """A final :func:`to_dataset` (dimension ``run``) with each run's last density (module docstring).

    Raises
    ------
    ConfigError
        A particle run, or runs on different meshes.
    """
    from ..masks import whole_measure
    from ..rundir.results import PDERunResult, load_run

    results = [load_run(path) for path in ds["run"].values]
    results = [whole_measure(result) for result in results]
    first = next((result for result in results if isinstance(result, PDERunResult)), None)
    for result in results:
        if not isinstance(result, PDERunResult):
            raise ConfigError(f"--densities: {result.path} is a particle run (final densities of PDE runs only)")
        assert first is not None
        if result.cells.shape != first.cells.shape or not np.array_equal(result.cells, first.cells):
            raise ConfigError(f"--densities: {result.path} has {len(result.cells)} cells, {first.path} "
                              f"{len(first.cells)}, or other cells; collect the densities of runs on one mesh")
    assert first is not None
    density = np.array([result.densities[-1] if len(result.times) else np.full(len(result.areas), np.nan)
                        for result in results if isinstance(result, PDERunResult)])
    ds = ds.assign(density=(("run", "cell"), density, {"long_name": "density cell averages at the run's last "
                                                                     "output (time t)", "units": "1"}))
    axes = "xyz"[: first.centroids.shape[1]]
    return ds.assign_coords({f"cell_{a}": ("cell", first.centroids[:, i], {"long_name": f"{a} of the cell centroid"})
                             for i, a in enumerate(axes)} |
                            {"cell_area": ("cell", first.areas, {"long_name": "cell measure", "units": "1"})})


def write_table(table: pandas.DataFrame, out: str | Path, *, final: bool = False, overwrite: bool = False,
                densities: bool = False) -> Path:
    """Write a :func:`collect` table as CSV or netCDF, by the suffix of ``out`` (atomically).

    ``densities``: netCDF only, ``table`` a ``final`` one; add the runs' final densities
    (:func:`with_densities`).

    Raises
    ------
    ConfigError
        Another suffix, an existing file without ``overwrite``, or densities that cannot be
        gathered.
    """
    out = check_table_output(out, overwrite=overwrite)
    if densities:
        check_densities_output(out)
    if out.suffix == ".csv":
        write_text(out, table.to_csv(index=False))
        return out
    ds = to_dataset(table, final=final or densities)
    return write_dataset(with_densities(ds) if densities else ds, out)


def write_dataset(ds: xarray.Dataset, out: Path) -> Path:
    """Write a Dataset as netCDF atomically (a temporary file beside ``out``, then renamed)."""
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        ds.to_netcdf(tmp, engine="h5netcdf")
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out
