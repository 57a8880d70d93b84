"""The command line parses and calls the Python API, nothing more: the shared arguments reach the
API as given (read once into :class:`meanfield.cli.options.Options`), and importing the CLI loads
none of the API (``meanfield --help`` stays fast)."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
from helpers.cli import cli_environment

from meanfield.cli import build_parser, main
from meanfield.cli.options import Options

SHARED = ["--out", "somewhere", "--set", "model.beta=2", "--set", "time.t_final=1", "--quiet", "--overwrite"]


def _record(calls: list, result: object):
    def api(*args, **keywords):
        calls.append((args, keywords))
        return result

    return api


def test_run_hands_the_shared_arguments_to_the_api(monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr("meanfield.drivers.pde.run", _record(calls, SimpleNamespace(path="somewhere")))
    assert main(["run", "case.toml", *SHARED]) == 0
    assert calls == [(("case.toml",), {"out": "somewhere", "overrides": ["model.beta=2", "time.t_final=1"],
                                       "quiet": True, "overwrite": True})]
    assert capsys.readouterr().out == "results: somewhere\n"


def test_a_particle_sweep_adds_its_token_count_to_the_overrides(monkeypatch, capsys):
    calls: list = []
    done = SimpleNamespace(path="s", points=[], status=[], errors={}, table=lambda: [])
    monkeypatch.setattr("meanfield.studies.sweep.sweep", _record(calls, done))
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    assert main(["sweep", "case.toml", "--grid", "model.beta=1,2", "--particles", "--n", "50", *SHARED]) == 0
    (args, keywords), = calls
    assert args == ("case.toml", ["model.beta=1,2"])
    assert keywords["overrides"] == ["model.beta=2", "time.t_final=1", "particles.n=50"]
    assert (keywords["out"], keywords["quiet"], keywords["overwrite"]) == ("somewhere", True, True)


def test_no_memory_check_turns_the_guard_off(monkeypatch):
    calls: list = []
    monkeypatch.setattr("meanfield.drivers.pde.run", _record(calls, SimpleNamespace(path="r")))
    monkeypatch.setattr("meanfield.memory.disable_guard", _record(calls, None))
    assert main(["run", "case.toml", "--no-memory-check", "--quiet"]) == 0
    assert calls[0] == ((), {})  # the guard first, then the run
    assert main(["run", "case.toml", "--quiet"]) == 0
    assert len(calls) == 3  # no second disable_guard


@pytest.mark.parametrize("argv, expected", [
    (["info"], Options(out=None, overrides=[], quiet=False, overwrite=False, memory_check=True)),
    (["resume", "r", "--set", "time.dt=0.1", "--quiet", "--no-memory-check"],
     Options(out=None, overrides=["time.dt=0.1"], quiet=True, overwrite=False, memory_check=False)),
    (["mesh", "S1", "-o", "m.vtu", "--overwrite"],
     Options(out=None, overrides=[], quiet=False, overwrite=True, memory_check=True)),
    (["check", "--out", "o", "--set", "mesh.resolution=2"],
     Options(out="o", overrides=["mesh.resolution=2"], quiet=False, overwrite=False, memory_check=True)),
])
def test_options_take_defaults_for_the_arguments_a_command_does_not_have(argv, expected):
    assert Options.from_args(build_parser().parse_args(argv)) == expected


def test_importing_the_command_line_loads_none_of_the_api():
    code = "import sys, meanfield.cli; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=cli_environment())
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    ours = [m for m in loaded if m.startswith("meanfield") and not m.startswith("meanfield.cli")]
    # the spheres' descriptors (no numpy) give ``meanfield mesh`` its choices and options
    assert sorted(ours) == ["meanfield", "meanfield.spheres", "meanfield.version", "meanfield.wording"]
    assert not {"numpy", "mpi4py", "dolfinx"} & set(loaded)
