"""Clusters across runs, for phase diagrams: each run's cluster count and formation time.

``meanfield collect --clusters`` adds to a collected table (:mod:`.collect`)

``clusters``
    The number of clusters at each row's output time: the cluster analysis of
    ``meanfield clusters`` with its defaults (:func:`~meanfield.analysis.clusters.analyse_run`:
    basins of the density's significant peaks above the uniform density; for particle runs a
    kernel density estimate at their token count's bandwidth and noise prominence).
``formation_time``
    Per run: the first time the density's global maximum reaches :data:`FORMATION_FACTOR`
    times the uniform density (interpolated between outputs, :mod:`.clusters.crossing`);
    the run's first output time when it was already that high there, nan when it never got
    there.

and draws the clusters at each run's last output, and the formation time, against the first
swept parameter (:func:`clusters_figure`), one line per value of the other parameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .clusters.crossing import ALREADY, CROSSED

if TYPE_CHECKING:
    import pandas
    from matplotlib.figure import Figure

#: The formation time is when the density's maximum first reaches this many times the uniform density.
FORMATION_FACTOR = 10.0
#: netCDF attributes of the columns :func:`with_clusters` adds.
ATTRIBUTES = {"clusters": {"long_name": "number of clusters (meanfield clusters' analysis)", "units": "1"},
              "formation_time": {"long_name": f"first time the density's maximum reaches {FORMATION_FACTOR:g} x "
                                              "uniform", "units": "1"}}
#: The picture :func:`write_clusters_figure` writes beside a table ``T.csv``: ``T-clusters.png``.
PICTURE_SUFFIX = "-clusters.png"


def run_clusters(run_dir: str | Path) -> tuple[np.ndarray, np.ndarray, float]:
    """``(times, cluster counts, formation time)`` of one run (module docstring)."""
    from .clusters import analyse_run

    history = analyse_run(run_dir, factors=(FORMATION_FACTOR,), plots=False)
    (crossing,) = [c for c in history.crossings if c.id is None]
    formation = crossing.time if crossing.status == CROSSED else \
        float(history.times[0]) if crossing.status == ALREADY else float("nan")
    return history.times, history.counts, formation


def with_clusters(table: pandas.DataFrame) -> pandas.DataFrame:
    """A :func:`~.collect.collect` table with ``formation_time`` (a run column, before ``t``)
    and ``clusters`` (integers at each row's time; missing where the run has no output at that time)."""
    import pandas as pd

    columns = list(table.columns)
    formation, counts = {}, []
    for run_dir, rows in table.groupby("run", sort=False):
        times, count, formation[run_dir] = run_clusters(str(run_dir))
        at = {round(float(t), 9): float(c) for t, c in zip(times, count)}
        counts.append(rows["t"].map(lambda t, at=at: at.get(round(float(t), 9), np.nan)))
    out = table.assign(formation_time=table["run"].map(formation), clusters=pd.concat(counts).astype("Int64"))
    at_t = columns.index("t")
    return out[[*columns[:at_t], "formation_time", *columns[at_t:], "clusters"]]


def picture_path(table_path: str | Path) -> Path:
    """Where the picture of a table's clusters goes: ``T-clusters.png`` beside ``T.csv`` / ``T.nc``."""
    path = Path(table_path)
    return path.with_name(path.stem + PICTURE_SUFFIX)


def check_picture(path: Path, *, overwrite: bool = False) -> None:
    """Refuse to replace an existing picture without ``overwrite`` (ConfigError naming it); nothing is written."""
    from ..config import ConfigError

    if path.exists() and not overwrite:
        raise ConfigError(f"--clusters: {path} exists; pass --overwrite to replace it")


def write_clusters_figure(table: pandas.DataFrame, parameters: list[str], path: str | Path) -> Path:
    """Save :func:`clusters_figure` as a PNG."""
    clusters_figure(table, parameters).savefig(path, dpi=100)
    return Path(path)


def clusters_figure(table: pandas.DataFrame, parameters: list[str]) -> Figure:
    """Clusters at each run's last output and formation time against ``parameters[0]``, one
    line per value of the other parameters (a :func:`with_clusters` table)."""
    from matplotlib.figure import Figure

    last = table.groupby("run", sort=False).tail(1)
    fig = Figure(figsize=(10, 4), layout="constrained")
    count, formation = fig.subplots(1, 2, sharex=True)
    x_name, others = parameters[0], parameters[1:]
    groups = last.groupby(others, sort=True) if others else [((), last)]
    for key, rows in groups:
        rows = rows.sort_values(x_name)
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{k} = {v}" for k, v in zip(others, key)) or None
        count.plot(rows[x_name], rows["clusters"], "o-", label=label)
        formation.plot(rows[x_name], rows["formation_time"], "o-", label=label)
    count.set(xlabel=x_name, ylabel="clusters at the last output", title="clusters")
    count.yaxis.get_major_locator().set_params(integer=True)
    never = last.loc[last["formation_time"].isna(), x_name].tolist()
    formation.set(xlabel=x_name, ylabel="t", title=f"formation: max density reaches {FORMATION_FACTOR:g} x uniform"
                  + (f"\n(never by the last output: {x_name} = {', '.join(map(str, never))})" if never else ""))
    if others:
        count.legend(fontsize=7)
    return fig
