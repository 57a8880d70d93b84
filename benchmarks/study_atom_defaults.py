"""The ``[atoms]`` defaults, by evidence: merge times and cluster masses against each key.

Each key that controls only the cost or the accuracy of the atom phase is halved and doubled
about its candidate default, all other keys at their defaults (``[atoms] capture = true`` and
nothing else), and the hybrid run's merge times and cluster masses
(:func:`meanfield.studies.longtime.run_history`) are compared with those of the run at the
defaults.  A default is accepted when halving and doubling it moves every merge time by less
than :data:`ACCEPT` (relative).

Cases (softmax, Q = K = V = I, DG1, 1024 cells, the fast field):

``example``
    ``runs/examples/s1-long-time.toml``'s density, beta = 9, to t = 60: four clusters captured
    by t ~ 12, the first merge at t ~ 36.6 (after the density has gone to the atoms).
``late``
    ``benchmarks/bench_long_time_s1.py``'s case a (a perturbed uniform density, seed 1),
    beta = 9, to t = 200: merges at t ~ 141.6 and ~ 169.7, after long metastable times,
    where a step error of the atoms accumulates.

Run::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/study_atom_defaults.py [--cases example,late]
        [--keys absorb_mass,lipschitz_step,merge_distance] [--out runs/study-atom-defaults]

Prints one table per case (key, value, merge times, the largest relative change of a merge
time against the defaults' -- merges paired by
:func:`~meanfield.studies.longtime.compare_histories`, so a merge that only one run resolves, two
pieces of one cluster captured apart, is listed as unpaired --, cluster masses at the end,
steps, wall and CPU seconds of the run) and writes ``summary.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from common import perturbation, table

import meanfield
from meanfield.analysis.longtime import PointSetHistory, compare_histories
from meanfield.config import load_config
from meanfield.studies.longtime import run_history
from meanfield.studies.longtime.study import output_times

EXAMPLE = "runs/examples/s1-long-time.toml"
#: name -> (initial expression, or None for the example's; t_final)
CASES: dict[str, tuple[str | None, float]] = {"example": (None, 60.0), "late": (perturbation(1), 200.0)}
#: Keys varied by default: the atom phase's cost and accuracy controls (the capture rule,
#: ``core_level,core_cells,min_height,core_fraction``, with ``--keys``).
KEYS = ("absorb_mass", "lipschitz_step", "merge_distance")
#: Largest accepted relative change of a merge time when a key is halved or doubled.
ACCEPT = 5e-3


def config(case: str, atoms: dict) -> dict:
    """The case with ``[atoms] capture = true`` and the given keys (the rest: defaults)."""
    expression, t_final = CASES[case]
    data = load_config(EXAMPLE).data
    return {"name": f"atom-defaults-{case}", "mesh": {"sphere": "S1", "resolution": 1024},
            "model": {"attention": "softmax", "beta": 9.0}, "scheme": {"kind": "dg1"},
            "nonlocal": {"method": "auto"},
            "initial": {"kind": "expression", "expression": expression or data["initial"]["expression"]},
            "time": {"t_final": t_final, "outputs": output_times(t_final, dt_early=0.25, dt_late=1.0).tolist()},
            "atoms": {"capture": True, **atoms}, "output": {"xdmf": False}}


def one_run(case: str, atoms: dict, out: Path) -> tuple[dict, PointSetHistory]:
    """Run the case; its merge times, final cluster masses, steps and times, and its history."""
    tic, cpu = time.perf_counter(), time.process_time()
    run = meanfield.run(config(case, atoms), out=out, quiet=True, overwrite=True)
    wall, cpu = time.perf_counter() - tic, time.process_time() - cpu
    h = run_history(out)
    return {"atoms": atoms, "merges": [e.time for e in h.merges()], "masses": h.masses[-1].tolist(),
            "steps": run.metadata["steps"]["steps"], "wall_s": wall, "cpu_s": cpu}, h


def change(history: PointSetHistory, base: PointSetHistory) -> tuple[float, int]:
    """Largest relative change of the merges paired with the defaults'
    (:func:`~meanfield.studies.longtime.compare_histories`), and the number of unpaired merges."""
    errors = compare_histories(base, history, history.times[-1]).merge_errors
    paired = errors[np.isfinite(errors)]
    return float(paired.max(initial=0.0)), int(np.sum(~np.isfinite(errors)))


def study(case: str, keys: list[str], out: Path) -> dict:
    resolved = load_config(config(case, {})).data["atoms"]  # core_cells: its value on S^1
    defaults = {key: resolved[key] for key in keys}
    base, base_history = one_run(case, {}, out / f"{case}-default")
    rows = {"default": base}
    print(f"case {case}: defaults {defaults}: merges {np.round(base['merges'], 4).tolist()}, "
          f"{base['steps']} steps, {base['wall_s']:.0f} s wall, {base['cpu_s']:.0f} s CPU", flush=True)
    for key in keys:
        for factor in (0.5, 2.0):
            value = defaults[key] * factor
            if isinstance(defaults[key], int):  # core_cells 3 -> 2, 6
                value = max(1, round(value))
            if key == "core_fraction":  # a share up to 1: its complement is halved and doubled (0.95, 0.8)
                value = 1.0 - (1.0 - defaults[key]) * factor
            name = f"{key}={value:g}"
            rows[name], history = one_run(case, {key: value}, out / f"{case}-{key}-{factor:g}")
            rows[name]["change"], rows[name]["unpaired"] = change(history, base_history)
            print(f"  {name}: merges {np.round(rows[name]['merges'], 4).tolist()}, change "
                  f"{rows[name]['change']:.1e} ({rows[name]['unpaired']} unpaired), {rows[name]['cpu_s']:.0f} s CPU",
                  flush=True)
    header = ["key = value", "merge times", "largest change", "unpaired", "masses at the end", "steps", "wall s",
              "CPU s"]
    body = [[name, " ".join(f"{t:.4f}" for t in r["merges"]), "-" if name == "default" else f"{r['change']:.1e}",
             r.get("unpaired", 0), " ".join(f"{m:.5f}" for m in sorted(r["masses"])), r["steps"], r["wall_s"],
             r["cpu_s"]] for name, r in rows.items()]
    print(table(header, body))
    worst = max(r["change"] for name, r in rows.items() if name != "default")
    print(f"case {case}: largest change of a merge time {worst:.1e} "
          f"({'within' if worst < ACCEPT else 'ABOVE'} {ACCEPT:.1%})", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--keys", default=",".join(KEYS))
    parser.add_argument("--out", default="runs/study-atom-defaults")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {case: study(case, args.keys.split(","), out) for case in args.cases.split(",")}
    (out / "summary.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
