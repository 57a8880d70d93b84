"""Calibration of :mod:`meanfield.memory`: measured peak resident memory against the estimate.

Each case runs the CLI in a fresh process (two fixed steps of a tiny ``dt``, one output, no
ParaView files) and reads the peak resident memory of its process tree (``ru_maxrss`` of the
children: the largest rank under ``mpirun``).  The coefficients in ``meanfield/memory.py`` are
fitted to these numbers and rounded up; the table shows measured, estimated and their ratio.

    python benchmarks/memory_estimate.py                 # the default cases, one rank
    python benchmarks/memory_estimate.py --ranks 2 run:S2:8:fv run:S2:7:dg1

Cases: ``run:SPHERE:RESOLUTION:SCHEME``, ``particles:SPHERE:N``, ``mesh:LEVEL`` (S2).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = ["run:S2:5:fv", "run:S2:7:fv", "run:S2:8:fv", "run:S2:6:dg1", "run:S2:7:dg1", "run:S1:1048576:fv",
           "run:S1:524288:dg1", "particles:S2:100000", "particles:S2:1000000", "particles:S1:1000000", "mesh:7",
           "mesh:8"]
CONFIG = ('name = "x"\n[mesh]\nsphere = "{sphere}"\nresolution = {resolution}\n[scheme]\nkind = "{scheme}"\n'
          '[time]\nt_final = 2e-6\ndt = 1e-6\noutputs = 1\n[output]\nxdmf = false\n[particles]\ndt = 1e-6\n')
_MEASURE = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)")


def measure(args: list[str], config: str | None, ranks: int) -> tuple[float, int]:
    """Peak resident bytes of ``meanfield ARGS`` in a fresh process tree, and its exit code."""
    folder = Path(tempfile.mkdtemp(prefix="memory-estimate-"))
    try:
        if config is not None:
            (folder / "c.toml").write_text(config)
        mpirun = [str(Path(sys.executable).with_name("mpirun")), "-n", str(ranks)] if ranks > 1 else []
        env = dict(os.environ, PYTHONPATH=str(REPO), MEANFIELD_MEMORY_CHECK="off")
        out = subprocess.run([sys.executable, "-c", _MEASURE, *mpirun, sys.executable, "-m", "meanfield.cli", *args],
                             cwd=folder, env=env, capture_output=True, text=True, check=True).stdout.split()
        return int(out[0]) * 1024.0, int(out[1])
    finally:
        shutil.rmtree(folder)


def case(text: str, ranks: int):
    """The command, config and estimate of one case."""
    from meanfield import memory

    kind, *rest = text.split(":")
    if kind == "run":
        sphere, resolution, scheme = rest
        cells = memory.cells_of(sphere, int(resolution))
        return (["run", "c.toml", "--out", "o", "--quiet"],
                CONFIG.format(sphere=sphere, resolution=resolution, scheme=scheme),
                memory.pde_estimate(sphere, scheme, cells, text, ranks))
    if kind == "particles":
        sphere, n = rest
        return (["particles", "c.toml", "--n", n, "--out", "o", "--quiet"],
                CONFIG.format(sphere=sphere, resolution=1 if sphere == "S2" else 8, scheme="fv"),
                memory.particle_estimate(int(n), 3 if sphere == "S2" else 2, text, ranks))
    level = int(rest[0])
    return (["mesh", "S2", "--level", str(level), "-o", "m.vtu"], None,
            memory.mesh_estimate("S2", memory.cells_of("S2", level), text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", default=DEFAULT)
    parser.add_argument("--ranks", type=int, default=1)
    options = parser.parse_args()
    print(f"{'case':<24} {'measured MB':>12} {'estimate MB':>12} {'ratio':>6}")
    for text in options.cases:
        args, config, estimate = case(text, options.ranks)
        peak, code = measure(args, config, options.ranks)
        note = "" if code == 0 else f"  (exit {code})"
        print(f"{text:<24} {peak / 1e6:>12.0f} {estimate.per_rank / 1e6:>12.0f} {estimate.per_rank / peak:>6.2f}{note}",
              flush=True)


if __name__ == "__main__":
    main()
