"""Ensembles of runs over one config key (``meanfield collect --ensemble KEY``): weight draws.

A sweep over ``model.random.seed`` (``meanfield sweep --draws N``) is an ensemble of weight
draws: each run is the conditional law of one draw, and the law over draws is the object of
the theory.  :func:`ensemble` reduces a :func:`~meanfield.analysis.collect.collect` table over
the runs that differ only in ``KEY``: for every other parameter value (a group), kind and
output time, the number of members and the mean and standard deviation (``ddof = 1``) of
every observable over them::

    kind, <other parameters>, t, members, order_mean, order_std, energy_mean, energy_std, ...

The standard error of a mean is ``std / sqrt(members)``.  With ``densities`` (netCDF, PDE runs
on one mesh) :func:`with_mean_densities` adds the mean density over the members at every
output time, ``density_mean(group, time, cell)``: the annealed law.  :func:`plot_ensemble`
draws the members and their mean and spread of the order parameter and the energy against
depth (time).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..config import ConfigError
from ..rundir.directory import check_creatable
from ..rundir.files import write_text

if TYPE_CHECKING:
    import pandas
    import xarray

#: Suffixes of the pictures :func:`plot_ensemble` writes.
PICTURE_FORMATS = (".png", ".pdf", ".svg")
#: Statistics of an observable over the members, as column suffixes.
STATISTICS = ("mean", "std")


def _parameter_columns(table: pandas.DataFrame) -> list[str]:
    """The columns before ``t`` after ``run``, ``kind``, ``status``: the parameters."""
    columns = list(table.columns)
    return columns[3: columns.index("t")]


def _observable_columns(table: pandas.DataFrame) -> list[str]:
    return list(table.columns)[list(table.columns).index("t") + 1:]


def group_columns(table: pandas.DataFrame, over: str) -> list[str]:
    """``kind`` and the parameters other than ``over``: what identifies a group.

    Raises
    ------
    ConfigError
        ``over`` is not a parameter of the table (the runs do not differ in it).
    """
    parameters = _parameter_columns(table)
    if over not in parameters:
        raise ConfigError(f"--ensemble {over}: not a parameter the runs differ in (they differ in "
                          f"{parameters or 'nothing'})")
    return ["kind", *[p for p in parameters if p != over]]


def ensemble(table: pandas.DataFrame, over: str) -> pandas.DataFrame:
    """Members, mean and standard deviation of every observable over ``over`` (module docstring).

    Parameters
    ----------
    table
        A :func:`~meanfield.analysis.collect.collect` table (long format).
    over
        The parameter the members differ in (``model.random.seed``).
    """
    import pandas as pd

    keys = [*group_columns(table, over), "t"]
    observables = _observable_columns(table)
    grouped = table.groupby(keys, sort=False, dropna=False)
    columns: dict[str, pandas.Series] = {"members": grouped.size()}
    for name in observables:
        for statistic in STATISTICS:
            columns[f"{name}_{statistic}"] = grouped[name].agg(statistic)
    return pd.DataFrame(columns).reset_index()


def with_mean_densities(ds: xarray.Dataset, table: pandas.DataFrame, over: str) -> xarray.Dataset:
    """The ensemble Dataset (dims ``group``, ``time``) with the members' mean density at every
    output time, ``density_mean(group, time, cell)``, and the cells' centroids and areas.

    Raises
    ------
    ConfigError
        A particle run, or runs on different meshes.
    """
    from ..rundir.results import PDERunResult, load_run

    keys = group_columns(table, over)
    runs = table.drop_duplicates("run")
    first: PDERunResult | None = None
    means = []
    for _, members in runs.groupby(keys, sort=False, dropna=False):
        total = None
        for path in members["run"]:
            result = load_run(path)
            if not isinstance(result, PDERunResult) or result.densities.ndim != 2:
                raise ConfigError(f"--densities: {path} is not a PDE run without a mask (mean densities of PDE "
                                  "runs only)")
            first = first or result
            if not np.array_equal(result.cells, first.cells) or len(result.times) != ds.sizes["time"]:
                raise ConfigError(f"--densities: {path} and {first.path} differ in mesh or output times")
            total = result.densities.copy() if total is None else total + result.densities
        assert total is not None
        means.append(total / len(members))
    assert first is not None
    ds = ds.assign(density_mean=(("group", "time", "cell"), np.array(means),
                                 {"long_name": "mean over the members of the density cell averages (the annealed "
                                               "law)", "units": "1"}))
    axes = "xyz"[: first.centroids.shape[1]]
    return ds.assign_coords({f"cell_{a}": ("cell", first.centroids[:, i], {"long_name": f"{a} of the cell centroid"})
                             for i, a in enumerate(axes)} |
                            {"cell_area": ("cell", first.areas, {"long_name": "cell measure", "units": "1"})})


def to_dataset(reduced: pandas.DataFrame) -> xarray.Dataset:
    """An :func:`ensemble` table as a Dataset: dims ``(group, time)``, the group's kind and
    parameters as coordinates along ``group``."""
    keys = list(reduced.columns[: list(reduced.columns).index("t")])
    reduced = reduced.assign(group=reduced.groupby(keys, sort=False, dropna=False).ngroup())
    values = [c for c in reduced.columns if c not in (*keys, "t", "group")]
    ds = reduced.set_index(["group", "t"])[values].to_xarray().rename(t="time")
    described = reduced.groupby("group")[keys].first()
    for name, column in described.items():
        data = column.to_numpy()
        ds = ds.assign_coords({str(name): ("group", data.astype(str) if data.dtype == object else data)})
    ds["time"].attrs.update(long_name="model time t (depth)", units="1")
    ds["group"].attrs.update(long_name=f"ensemble group: the members that share {', '.join(keys)} (its values: "
                                       "the coordinates along group), numbered from 0 in the order first met")
    return ds


def check_plot_output(path: str | Path, *, overwrite: bool = False) -> Path:
    """Refuse a picture :func:`plot_ensemble` may not write (ConfigError naming ``--plot``)."""
    path = Path(path)
    if path.suffix not in PICTURE_FORMATS:
        raise ConfigError(f"--plot {path}: must end in {', '.join(PICTURE_FORMATS)}")
    if path.exists() and not overwrite:
        raise ConfigError(f"--plot {path}: the file exists; pass --overwrite to replace it")
    if not path.parent.is_dir():
        raise ConfigError(f"--plot {path}: the folder {path.parent} does not exist")
    if not path.exists():
        check_creatable(path, "--plot")
    return path


def write_ensemble(table: pandas.DataFrame, over: str, out: str | Path, *, overwrite: bool = False,
                   densities: bool = False) -> pandas.DataFrame:
    """Reduce a collect table over ``over`` (:func:`ensemble`) and write it as CSV or netCDF by the
    suffix of ``out`` (``densities``: netCDF with :func:`with_mean_densities`); returns the reduced table."""
    from .collect import check_densities_output, check_table_output, write_dataset

    out = check_table_output(out, overwrite=overwrite)
    if densities:
        check_densities_output(out)
    reduced = ensemble(table, over)
    if out.suffix == ".csv":
        write_text(out, reduced.to_csv(index=False))
    else:
        ds = to_dataset(reduced)
        write_dataset(with_mean_densities(ds, table, over) if densities else ds, out)
    return reduced


def log_scaled(values: np.ndarray) -> bool:
    """Whether an ensemble panel is drawn on a log axis: positive values spanning more than two decades."""
    return bool(np.nanmin(values) > 0 and np.nanmax(values) > 100 * np.nanmin(values))


def plot_ensemble(table: pandas.DataFrame, over: str, path: str | Path,
                  observables: tuple[str, ...] = ("order", "energy")) -> Path:
    """The members (thin lines), their mean and mean +- one standard deviation (band) of each
    observable against t, one panel per observable and one colour per group; written to ``path``.

    An energy that spans more than two decades is drawn on a log scale (:func:`log_scaled`), and
    there the statistics are those of its logarithm -- the geometric mean, times and divided by
    the geometric standard deviation -- so the band stays positive and whole where the
    arithmetic mean - std would fall below 0."""
    from matplotlib.figure import Figure

    keys = group_columns(table, over)
    present = [name for name in observables if name in table and np.isfinite(table[name].to_numpy(float)).any()]
    if not present:
        raise ConfigError(f"--plot: the runs have none of the observables {list(observables)}")
    logs = {name: name == "energy" and log_scaled(table[name].to_numpy(float)) for name in present}
    fig = Figure(figsize=(4.2 * len(present) + 0.4, 3.4), layout="constrained")
    axes = fig.subplots(1, len(present), squeeze=False)[0]
    for colour, (group, members) in enumerate(table.groupby(keys, sort=False, dropna=False)):
        label = ", ".join(f"{k}={v}" for k, v in zip(keys[1:], group[1:])) or str(group[0])
        count = members["run"].nunique()
        for ax, name in zip(axes, present):
            for _, member in members.groupby("run", sort=False):
                ax.plot(member["t"], member[name], color=f"C{colour}", lw=0.4, alpha=0.35)
            values = np.log(members[name]) if logs[name] else members[name]
            stats = values.groupby(members["t"]).agg(["mean", "std"])
            t = stats.index.to_numpy(float)
            low, mid, high = (stats["mean"] + k * stats["std"] for k in (-1, 0, 1))
            if logs[name]:
                low, mid, high = np.exp(low), np.exp(mid), np.exp(high)
            ax.plot(t, mid, color=f"C{colour}", lw=2, label=f"{label} ({count} members)")
            ax.fill_between(t, low, high, color=f"C{colour}", alpha=0.2)
    for ax, name in zip(axes, present):
        if logs[name]:
            ax.set_yscale("log")  # the energy of each layer's own kernel: e^{beta <Qx, Ky>} spans decades
        ax.set_xlabel("t (depth)")
        statistics = "geometric mean \N{MULTIPLICATION SIGN}/\N{DIVISION SIGN} std" if logs[name] else \
            "mean \N{PLUS-MINUS SIGN} std"
        ax.set_title(f"{name}: members, {statistics}\nover {over}", fontsize=9)
    axes[0].legend(fontsize=7)
    path = Path(path)
    fig.savefig(path, dpi=110)
    return path
