"""A refused command leaves nothing behind, in every subcommand.

Each case runs the CLI's ``main`` in this process (a refusal's subject is its exit code, its
streams and the files, not the process) and asserts exit code 2, one line on stderr naming the
field or option, nothing on stdout, and that the folder or file the command would write does
not exist afterwards (or, for a run directory or a file that already existed, is unchanged:
same names, sizes and modification times). Sizes far beyond the machine (an S^2 mesh of 335
million cells, a level-99 icosphere, 10^10 tokens) are refused at once by the memory estimate,
so these cases also show that nothing was allocated first: the error line is the estimate's,
given before the minutes those jobs would take. A selection (MPI_CASES) runs again under ``mpirun -n 2`` in fresh
processes, as users start them: the same exit code, one line from rank 0, nothing written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.cli import cli
from mpi4py import MPI

import meanfield

S1 = 'name = "x"\n[mesh]\nsphere = "S1"\nresolution = 32\n[time]\nt_final = 0.2\noutputs = 2\n[output]\nxdmf = false\n'
S2 = S1.replace('sphere = "S1"\nresolution = 32', 'sphere = "S2"\nresolution = 1')
CONFIGS = {
    "s1.toml": S1,
    "s2.toml": S2,
    "big.toml": S2.replace("resolution = 1", "resolution = 12"),  # 335,544,320 cells
    "deep.toml": S2 + '[initial]\nkind = "expression"\nexpression = "1 + ' + " + ".join(["x"] * 30000) + '"\n',
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """An S1 PDE run to t = 0.2 that the cases refer to (and must leave as it is)."""
    folder = tmp_path_factory.mktemp("refusals-run")
    (folder / "s1.toml").write_text(S1)
    meanfield.run(folder / "s1.toml", out=folder / "run", comm=MPI.COMM_SELF, quiet=True)
    return folder / "run"


@pytest.fixture
def meanfield_in(cli_in_process):
    """``meanfield ARGS`` in ``cwd``: ``main`` in this process on one rank (conftest's
    ``cli_in_process``), ``mpirun -n ranks`` otherwise; (exit code, stdout, stderr)."""

    def command(args: list[str], cwd: Path, ranks: int = 1) -> tuple[int, str, str]:
        done = cli(args, cwd, ranks) if ranks > 1 else cli_in_process(args, cwd)
        return done.returncode, done.stdout, done.stderr

    return command


def listing(path: Path) -> dict[str, tuple[int, int]] | None:
    """Names under ``path`` with size and mtime (``None``: the path does not exist)."""
    if not path.exists():
        return None
    if path.is_file():
        return {"": (path.stat().st_size, path.stat().st_mtime_ns)}
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*"))}


# (id, arguments, text the error line must contain, the path the command would write)
# RUN: the finished run directory (copied into the case's folder); OUT: a new folder or file.
CASES = [
    ("run-unknown-key", ["run", "s1.toml", "--out", "OUT", "--set", "model.betta=2"], "model.betta", "OUT"),
    ("run-too-big", ["run", "big.toml", "--out", "OUT"], "mesh.resolution = 12: needs an estimated", "OUT"),
    ("run-key-in-wrong-section", ["run", "s1.toml", "--out", "OUT", "--set", "time.checkpoint_every=5"],
     "time.checkpoint_every: unknown key; `checkpoint_every` belongs in [output]", "OUT"),
    ("run-one-number", ["run", "s1.toml", "--out", "OUT", "--set", "initial.kind='vmf'", "--set",
                        "initial.centers=[[1, 0]]", "--set", "initial.kappas=[-1]"],
     "initial.kappas: must be a finite number >= 0, got [-1]", "OUT"),
    ("run-deep-expression", ["run", "deep.toml", "--out", "OUT"], "initial.expression: nests too deeply", "OUT"),
    ("resume-mesh-change", ["resume", "RUN", "--set", "mesh.resolution=64"], "--set mesh.resolution", "RUN"),
    ("resume-t-final-before", ["resume", "RUN", "--t-final", "0.05"], "--t-final", "RUN"),
    ("resume-not-a-run", ["resume", "OUT"], "OUT: no such directory", "OUT"),
    ("particles-too-many", ["particles", "s2.toml", "--n", "10000000000", "--out", "OUT"],
     "particles.n = 10000000000: needs an estimated", "OUT"),
    ("particles-seed", ["particles", "s1.toml", "--n", "10", "--seed", "-1", "--out", "OUT"], "particles.seed", "OUT"),
    ("validate-n", ["validate", "s1.toml", "--n", "0", "--out", "OUT"], "--n", "OUT"),
    ("validate-pde-missing", ["validate", "s1.toml", "--n", "10", "--pde", "nothere", "--out", "OUT"], "--pde",
     "OUT"),
    ("validate-too-many", ["validate", "s2.toml", "--n", "10000000000", "--out", "OUT"], "needs an estimated", "OUT"),
    ("convergence-dt-ladder-without-dt", ["convergence", "s1.toml", "--levels", "1:2", "--dt-ladder", "--out", "OUT"],
     "--dt-ladder: set time.dt", "OUT"),
    ("convergence-levels", ["convergence", "s1.toml", "--levels", "5:3", "--out", "OUT"], "--levels", "OUT"),
    ("convergence-too-fine", ["convergence", "s2.toml", "--levels", "1:12", "--reference", "finest", "--out", "OUT"],
     "mesh.resolution = 12: needs an estimated", "OUT"),
    ("sweep-unknown-key", ["sweep", "s1.toml", "--grid", "model.betta=1,2", "--out", "OUT"], "model.betta", "OUT"),
    ("sweep-array-index", ["sweep", "s1.toml", "--grid", "model.beta=1,2", "--array-index", "9", "--out", "OUT"],
     "--array-index", "OUT"),
    ("sweep-too-big", ["sweep", "s2.toml", "--grid", "mesh.resolution=1,12", "--out", "OUT"],
     "mesh.resolution = 12: needs an estimated", "OUT"),
    ("collect-format", ["collect", "RUN", "-o", "OUT.xyz"], "-o OUT.xyz", "OUT.xyz"),
    ("collect-folder", ["collect", "RUN", "-o", "OUT/table.csv"], "-o OUT/table.csv: the folder OUT", "OUT"),
    ("clusters-threshold", ["clusters", "RUN", "--threshold", "-1", "--out", "OUT"], "threshold", "OUT"),
    ("clusters-bandwidth", ["clusters", "RUN", "--bandwidth", "-1", "--out", "OUT"], "bandwidth", "OUT"),
    ("plot-format", ["plot", "RUN", "--format", "bmp", "--out", "OUT"], "--format bmp", "OUT"),
    ("plot-not-a-run", ["plot", "nothere", "--out", "OUT"], "nothere: no such directory", "OUT"),
    ("longtime-sphere", ["longtime", "s2.toml", "--out", "OUT"], "mesh.sphere", "OUT"),
    ("longtime-n", ["longtime", "s1.toml", "--out", "OUT", "--n", "0"], "--n", "OUT"),
    ("longtime-delta", ["longtime", "s1.toml", "--out", "OUT", "--n", "64", "--delta", "-1"], "--delta", "OUT"),
    ("longtime-run", ["longtime", "s1.toml", "--out", "OUT", "--n", "64", "--run", "nothere"], "nothere", "OUT"),
    ("mesh-too-big", ["mesh", "S2", "--level", "99", "-o", "OUT.msh"], "--level 99: needs an estimated", "OUT.msh"),
    ("mesh-format", ["mesh", "S2", "--level", "1", "-o", "OUT.xyz"], "-o OUT.xyz", "OUT.xyz"),
    ("mesh-cells", ["mesh", "S1", "--cells", "2", "-o", "OUT.msh"], "--cells", "OUT.msh"),
    ("mesh-s2-cells", ["mesh", "S2", "--cells", "64", "-o", "OUT.msh"], "--cells: S2 meshes take --level", "OUT.msh"),
    ("mesh-s1-level", ["mesh", "S1", "--level", "2", "-o", "OUT.msh"], "--level: S1 meshes take --cells", "OUT.msh"),
    ("check-unknown-key", ["check", "s1.toml", "--out", "OUT", "--set", "model.betta=2"], "model.betta", "OUT"),
    ("info-not-a-run", ["info", "OUT"], "OUT: no such directory", "OUT"),
]
#: The cases run again under ``mpirun -n 2`` (one line from rank 0, the same exit code, nothing written).
MPI_CASES = ["run-too-big", "resume-mesh-change", "particles-too-many", "validate-too-many",
             "convergence-dt-ladder-without-dt", "sweep-too-big", "collect-folder", "plot-format", "longtime-run",
             "mesh-too-big", "check-unknown-key"]


PARAMS = [pytest.param(*case[1:], 1, id=case[0]) for case in CASES] + \
    [pytest.param(*case[1:], 2, id=f"{case[0]}-mpirun2") for case in CASES if case[0] in MPI_CASES]


@pytest.mark.parametrize("args, field, target, ranks", PARAMS)
def test_refusal_leaves_nothing(tmp_path, finished_run, meanfield_in, args, field, target, ranks):
    for name, text in CONFIGS.items():
        (tmp_path / name).write_text(text)
    shutil.copytree(finished_run, tmp_path / "RUN")
    watched = tmp_path / target
    before = listing(watched)
    code, out, err = meanfield_in(args, tmp_path, ranks)
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0], err
    assert out == ""
    assert listing(watched) == before, f"{target} changed: {before} -> {listing(watched)}"


def test_existing_files_are_not_replaced_without_overwrite(tmp_path, finished_run, meanfield_in):
    """``mesh -o`` and ``collect -o`` onto a file the user wrote: refused, the file untouched."""
    mine = tmp_path / "mine.msh"
    mine.write_text("the user's own file\n")
    for args in (["mesh", "S1", "--cells", "8", "-o", "mine.msh"], ["collect", str(finished_run), "-o", "mine.csv"]):
        target = tmp_path / args[-1]
        target.write_text("the user's own file\n")
        code, _, err = meanfield_in(args, tmp_path)
        assert code == 2 and "exists; pass --overwrite" in err, err
        assert target.read_text() == "the user's own file\n"


def test_refused_corrected_command_then_runs(tmp_path, meanfield_in):
    """The convergence case of the report: refused without time.dt, then the corrected command runs
    in the same folder (no study.json was left to refuse it)."""
    (tmp_path / "s1.toml").write_text(S1)
    code, _, err = meanfield_in(["convergence", "s1.toml", "--levels", "3:4", "--dt-ladder", "--out", "study",
                                 "--quiet"], tmp_path)
    assert code == 2 and "--dt-ladder: set time.dt" in err, err
    code, _, err = meanfield_in(["convergence", "s1.toml", "--levels", "3:4", "--dt-ladder", "--out", "study",
                                 "--quiet", "--set", "time.dt=0.01"], tmp_path)
    assert code == 0, err
    assert (tmp_path / "study" / "convergence.csv").is_file()
