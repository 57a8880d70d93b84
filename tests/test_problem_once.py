"""A run builds its problem once, and the configuration's import stays light.

The problem (:class:`meanfield.problem.Problem`) is built where a run starts (a PDE run, a
particle run with n and seed from the command line, a resume, ``meanfield check``) and handed
to everything downstream; the builds are counted here.  ``import meanfield.config`` and the
references import only the modules they need (counted in a fresh interpreter).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers.cli import REPO, cli_environment
from helpers.s1_cases import two_bumps
from mpi4py import MPI

import meanfield
from meanfield.drivers.planning import check_config
from meanfield.problem import Problem

#: Most meanfield modules an import may load (the module itself included).  The config loads the
#: registries its choices come from: attention kinds, masks (with the position formula, ``sequence``).
IMPORT_LIMITS = {"meanfield.config": 14, "meanfield.references.lagrangian_circle": 25}


@pytest.mark.parametrize("module, limit", IMPORT_LIMITS.items())
def test_imports_are_light(module, limit):
    code = f"import sys, {module}; print(len([m for m in sys.modules if m.startswith('meanfield')]))"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=cli_environment(), capture_output=True,
                          text=True, timeout=120, check=True)
    assert int(done.stdout) <= limit, f"{module} loads {done.stdout.strip()} meanfield modules"


def test_the_schema_names_the_schemes_the_registry_has():
    from meanfield.choices import SCHEME_DESCRIPTIONS
    from meanfield.discretisation.registry import SCHEMES

    assert list(SCHEMES) == list(SCHEME_DESCRIPTIONS)
    assert all(cls.description == SCHEME_DESCRIPTIONS[name] for name, cls in SCHEMES.items())


@pytest.fixture
def builds(monkeypatch) -> list[Problem]:
    """Every Problem built from now on, in order."""
    built: list[Problem] = []
    init = Problem.__init__

    def counted(self, config):
        init(self, config)
        built.append(self)

    monkeypatch.setattr(Problem, "__init__", counted)
    return built


def _case(tmp_path, extra: str = ""):
    path = tmp_path / "case.toml"
    path.write_text(two_bumps(2.0, 4.0) + "[time]\nt_final = 0.1\noutputs = 2\n[output]\nxdmf = false\n" + extra)
    return path


def test_a_pde_run_and_its_resume_build_one_problem_each(tmp_path, builds):
    run = meanfield.run(_case(tmp_path), out=tmp_path / "pde", comm=MPI.COMM_SELF, quiet=True)
    assert len(builds) == 1 and run.times[-1] == pytest.approx(0.1)
    builds.clear()
    resumed = meanfield.resume(tmp_path / "pde", t_final=0.2, comm=MPI.COMM_SELF, quiet=True)
    assert len(builds) == 1 and resumed.times[-1] == pytest.approx(0.2)
    assert builds[0].time.t_final == 0.2


def test_a_particle_run_with_n_and_seed_builds_one_problem(tmp_path, builds):
    run = meanfield.run_particles(_case(tmp_path), n=16, seed=3, out=tmp_path / "p", comm=MPI.COMM_SELF, quiet=True)
    assert len(builds) == 1
    assert (builds[0].particles.n, builds[0].particles.seed) == (16, 3) and run.points[-1].shape == (16, 2)


def test_check_builds_one_problem(tmp_path, builds):
    """The check's own problem once; the pilot run that counts the steps (a coarser mesh) and the
    short run that measures the costs are runs of their own, each with its own one problem."""
    path = _case(tmp_path)
    report = check_config(path, out=tmp_path / "run")
    assert report.problem is builds[0] and report.config is builds[0].config
    assert [p.config.source for p in builds] == [str(path)] + ["<dict>"] * (len(builds) - 1) and len(builds) <= 3
    assert not (tmp_path / "run").exists()
