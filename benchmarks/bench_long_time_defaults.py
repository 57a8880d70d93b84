"""Long-time runs at the ``[atoms]`` defaults: ``capture = true`` and nothing else.

``--case s1``
    ``runs/examples/s1-long-time.toml`` as it is (DG1, 1024 cells, softmax beta = 9, the fast
    field, to t = 2000; no hand-set atom key).  Target: at most 5 minutes on one core.  Its
    merges (:func:`meanfield.studies.longtime.run_history`) against the Lagrangian reference
    (:func:`~meanfield.studies.longtime.reference_history`) at n and 2n quantile tokens, the
    reference's own convergence being the difference of the two.
``--case s2``
    DG1 on the level-5 icosphere (20480 triangles), softmax beta = 9, the
    ``runs/examples/s2-long-time.toml`` density, to t = 1000.  Target: at most 15 minutes on
    one core.  Its merges (heavy atoms, :func:`meanfield.analysis.longtime.merges.point_merges`)
    against the coalescing-token reference (:func:`~meanfield.references.lagrangian_sphere.coalescing_tokens`)
    at n and 2n tokens (``--reuse``: only the reference, against the run already in ``--out``).

Both print the wall and the CPU time of the run (``time.process_time`` of this process: on a
loaded machine the CPU time of the single-threaded run is the cost on one free core), the
steps, the controller's split (time stepping, outputs, checkpoints) and the time the density
was absorbed (the start of the atoms-alone phase).  Run::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_long_time_defaults.py --case s1 [--n 8192]
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_long_time_defaults.py --case s2 [--t-final 1000]

Writes the run under ``--out`` (default ``runs/bench-long-time-<case>``) and ``summary.json`` in it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from common import setup_process

import meanfield
from meanfield.analysis.longtime import compare_histories
from meanfield.analysis.longtime.merges import point_merges
from meanfield.config import load_config
from meanfield.references.lagrangian_sphere import coalescing_tokens
from meanfield.studies.longtime import reference_history, run_history

S1_EXAMPLE = "runs/examples/s1-long-time.toml"
#: Clusters on S^2 are points of at least this mass: the tokens also resolve groups of ~1% of
#: the mass that coalesce in the saddle regions and join the clusters after formation (which
#: the hybrid's capture has swept into its atoms by then).
S2_MIN_MASS = 0.05
S2_EXAMPLE = "runs/examples/s2-long-time.toml"


#: Added to the s2-long-time example's density, which is symmetric under y <-> z and
#: (y, z) -> (-y, -z): its four clusters at +-y, +-z have equal masses and two pairs of them
#: merge at the same time, which samples of the density break (``--symmetric``: without it).
S2_GENERIC = " + 0.04*y + 0.03*x*z - 0.02*x*y"


def s2_config(t_final: float, symmetric: bool = False) -> dict:
    """The S^2 case: DG1, level 5, softmax beta = 9, the s2-long-time example's density (made
    generic by :data:`S2_GENERIC` unless ``symmetric``), ``[atoms] capture = true`` only."""
    expression = load_config(S2_EXAMPLE).data["initial"]["expression"] + ("" if symmetric else S2_GENERIC)
    return {"name": "bench-long-time-s2", "mesh": {"sphere": "S2", "resolution": 5}, "scheme": {"kind": "dg1"},
            "model": {"attention": "softmax", "beta": 9.0}, "nonlocal": {"method": "auto"},
            "initial": {"kind": "expression", "expression": expression},
            "time": {"t_final": t_final, "outputs": int(round(t_final))},
            "atoms": {"capture": True}, "output": {"xdmf": False}}


def timed_run(config, out: Path, overrides: list[str]) -> tuple[meanfield.PDERunResult, dict]:
    """``meanfield.run`` with its wall and CPU seconds, steps, controller split and absorption time."""
    cfg = load_config(config, overrides)
    assert cfg.data["atoms"]["capture"], "the benchmark is about [atoms] capture = true"
    tic, cpu = time.perf_counter(), time.process_time()
    run = meanfield.run(cfg, out=out, quiet=True, overwrite=True)
    facts = {"wall_s": time.perf_counter() - tic, "cpu_s": time.process_time() - cpu,
             "steps": run.metadata["steps"]["steps"], "timings": run.metadata["timings"]}
    obs = run.observables
    density = obs["mass"] - obs["atom_mass"]
    alone = np.flatnonzero((obs["atom_count"] > 0) & (np.abs(density) <= 1e-13))
    facts["atoms_alone_from_t"] = float(obs["t"][alone[0]]) if alone.size else None
    t = facts["timings"]
    print(f"run to t = {run.times[-1]:g}: {facts['wall_s']:.0f} s wall, {facts['cpu_s']:.0f} s CPU, "
          f"{facts['steps']} steps; time stepping {t['time_stepping']:.0f} s, outputs {t['output']:.0f} s, "
          f"checkpoints {t['checkpoint']:.0f} s (wall); atoms alone from t = {facts['atoms_alone_from_t']}; "
          f"mass drift {np.abs(obs['mass'] - 1.0).max():.1e}", flush=True)
    return run, facts


def s1(args: argparse.Namespace) -> dict:
    out = Path(args.out or "runs/bench-long-time-s1")
    overrides = [] if args.t_final is None else [f"time.t_final={args.t_final}"]
    atoms = load_config(S1_EXAMPLE).data["atoms"]
    print(f"{S1_EXAMPLE}: [atoms] as resolved {atoms}", flush=True)
    run, facts = timed_run(S1_EXAMPLE, out, overrides)
    hybrid = run_history(out)
    t_final = float(run.times[-1])
    facts["hybrid_merges"] = [e.time for e in hybrid.merges()]
    for n in (args.n, 2 * args.n):
        tic = time.perf_counter()
        ref = reference_history(S1_EXAMPLE, n=n, t_final=t_final)
        cmp = compare_histories(ref, hybrid, t_final)
        facts[f"reference_n{n}"] = {"merges": [e.time for e in ref.merges()], "pairs": cmp.merges.tolist(),
                                    "errors": cmp.merge_errors.tolist(), "centres": cmp.position_error,
                                    "masses": cmp.mass_error, "wall_s": time.perf_counter() - tic}
        errors = ", ".join(f"{e:.3%}" for e in cmp.merge_errors)
        print(f"reference n = {n} ({time.perf_counter() - tic:.0f} s): merges (reference, hybrid) "
              f"{np.round(cmp.merges, 4).tolist()}, errors [{errors}]; at t = {t_final:g}: clusters {cmp.counts}, "
              f"centres {cmp.position_error:.1e} rad, masses {cmp.mass_error:.1e}", flush=True)
    a, b = (facts[f"reference_n{n}"]["merges"] for n in (args.n, 2 * args.n))
    if len(a) == len(b) and a:
        print(f"reference n = {args.n} against {2 * args.n}: first merge {abs(a[0] - b[0]) / b[0]:.1e} (relative)")
    return facts


def s2(args: argparse.Namespace) -> dict:
    out = Path(args.out or "runs/bench-long-time-s2")
    config = s2_config(args.t_final or 1000.0, args.symmetric)
    if args.reuse:
        run, facts = meanfield.load_run(out), json.loads((out / "summary.json").read_text())
    else:
        run, facts = timed_run(config, out, args.set)
    times = run.times
    hybrid = point_merges(((t, a.positions, a.masses, a.ids) for t, a in zip(times, run.atoms, strict=True)),
                          min_mass=S2_MIN_MASS)
    facts["hybrid_merges"] = [(e.time, e.masses) for e in hybrid]
    last = run.atoms[-1]
    print(f"hybrid: merges {[(round(e.time, 3), np.round(e.masses, 4).tolist()) for e in hybrid]}; at t = "
          f"{times[-1]:g}: masses {np.round(np.sort(last.masses[last.masses >= 0.01]), 4).tolist()}", flush=True)
    cfg = load_config(config, args.set)
    for n in (args.n, 2 * args.n):
        tic, cpu = time.perf_counter(), time.process_time()
        frames = list(coalescing_tokens(cfg, n, times))
        ref = point_merges(((f.t, f.points, f.masses, f.ids) for f in frames), min_mass=S2_MIN_MASS)
        final = np.sort(frames[-1].masses[frames[-1].masses >= 0.01])
        facts[f"reference_n{n}"] = {"merges": [(e.time, e.masses) for e in ref], "final_masses": final.tolist(),
                                    "wall_s": time.perf_counter() - tic, "cpu_s": time.process_time() - cpu}
        first = (hybrid[0].time - ref[0].time) / ref[0].time if ref and hybrid else float("nan")
        print(f"reference n = {n} ({time.perf_counter() - tic:.0f} s wall, {time.process_time() - cpu:.0f} s CPU): "
              f"merges {[(round(e.time, 3), np.round(e.masses, 4).tolist()) for e in ref]}; at t = {times[-1]:g}: "
              f"masses {np.round(final, 4).tolist()}; hybrid's first merge {first:+.2%}", flush=True)
    a, b = (facts[f"reference_n{n}"]["merges"] for n in (args.n, 2 * args.n))
    if a and b:
        print(f"reference n = {args.n} against {2 * args.n}: first merge {abs(a[0][0] - b[0][0]) / b[0][0]:.1e} "
              "(relative)")
    return facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("s1", "s2"), required=True)
    parser.add_argument("--t-final", type=float, default=None, help="end time (default: the case's)")
    parser.add_argument("--n", type=int, default=8192, help="S^1 reference tokens (and twice as many)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--reuse", action="store_true", help="S^2: compare the run already in --out (no new run)")
    parser.add_argument("--symmetric", action="store_true", help="S^2: the example's symmetric density")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="S^2: a config change (not the defaults any more), e.g. atoms.core_cells=13")
    args = parser.parse_args()
    setup_process()
    facts = s1(args) if args.case == "s1" else s2(args)
    out = Path(args.out or f"runs/bench-long-time-{args.case}")
    (out / "summary.json").write_text(json.dumps(facts, indent=1, default=float))


if __name__ == "__main__":
    main()
