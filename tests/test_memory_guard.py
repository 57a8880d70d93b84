"""The memory estimate and the guard that refuses jobs bigger than the machine.

The estimate's coefficients are fitted to measured peak resident memory by
``benchmarks/memory_estimate.py`` (a benchmark, not a test: memory is not asserted here).
These tests check what does not depend on the machine: the sizes the estimate is computed
from (counted, against the meshes actually built), where the available memory is read
(cgroup v2, v1, MemAvailable, on fake files), the refusal and its override, and that
``meanfield check`` reports a job it would refuse without building it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from meanfield import memory
from meanfield.cli import main
from meanfield.drivers.planning import check_config
from meanfield.mesh import circle, icosphere


@pytest.mark.parametrize("level", range(5))
def test_counted_cells_are_those_of_the_built_icosphere(level):
    assert memory.cells_of("S2", level) == len(icosphere(level).cells)


def test_counted_cells_of_a_circle():
    assert memory.cells_of("S1", 37) == len(circle(37).cells)


def test_estimates_grow_with_the_job_and_shrink_with_ranks():
    small, big = (memory.pde_estimate("S2", "fv", memory.cells_of("S2", level), "x") for level in (5, 8))
    assert big.per_rank > small.per_rank > memory.BASE
    assert memory.pde_estimate("S2", "dg1", 10**6, "x").per_rank > memory.pde_estimate("S2", "fv", 10**6, "x").per_rank
    one, four = (memory.pde_estimate("S2", "fv", 10**7, "x", ranks) for ranks in (1, 4))
    assert four.per_rank < one.per_rank
    assert memory.particle_estimate(10**6, 3, "x").per_rank > memory.particle_estimate(10**6, 2, "x").per_rank


def fake_system(root: Path, *, meminfo_kb: int, cgroup: dict[str, str] | None = None, own: str = "") -> None:
    (root / "proc" / "self").mkdir(parents=True)
    (root / "proc" / "meminfo").write_text(f"MemTotal: 99999999 kB\nMemAvailable: {meminfo_kb} kB\n")
    (root / "proc" / "self" / "cgroup").write_text(f"0::/{own}\n")
    for name, value in (cgroup or {}).items():
        (root / "cgroup" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "cgroup" / name).write_text(value + "\n")


@pytest.mark.parametrize("cgroup, own, expected, source", [
    (None, "", 8 << 30, "MemAvailable"),
    ({"job/memory.max": str(3 << 30), "job/memory.current": str(1 << 30)}, "job", 2 << 30, "memory.max"),
    ({"job/memory.max": str(3 << 30), "job/memory.current": str(2 << 30),  # 1 GB of it reclaimable page cache
      "job/memory.stat": f"anon {1 << 30}\ninactive_file {1 << 30}"}, "job", 2 << 30, "memory.max"),
    ({"job/memory.max": "max", "job/memory.current": "5"}, "job", 8 << 30, "MemAvailable"),  # no limit
    ({"memory/memory.limit_in_bytes": str(4 << 30), "memory/memory.usage_in_bytes": str(1 << 30)}, "", 3 << 30,
     "limit_in_bytes"),
    ({"memory/memory.limit_in_bytes": "9223372036854771712", "memory/memory.usage_in_bytes": "7"}, "", 8 << 30,
     "MemAvailable"),  # v1 without a limit
], ids=["meminfo", "v2-limit", "v2-page-cache", "v2-max", "v1-limit", "v1-none"])
def test_available_memory_is_the_smaller_of_cgroup_room_and_memavailable(tmp_path, monkeypatch, cgroup, own,
                                                                         expected, source):
    fake_system(tmp_path, meminfo_kb=(8 << 30) // 1024, cgroup=cgroup, own=own)
    monkeypatch.setattr(memory, "CGROUP_ROOT", tmp_path / "cgroup")
    monkeypatch.setattr(memory, "PROC", tmp_path / "proc")
    room = memory.available_memory()
    assert room is not None and room[0] == expected and source in room[1]


def test_refusal_names_the_setting_and_the_estimate_and_the_override(monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: (10**9, "MemAvailable"))
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    estimate = memory.pde_estimate("S2", "fv", memory.cells_of("S2", 9), "mesh.resolution = 9")
    with pytest.raises(memory.MemoryEstimateError) as info:
        memory.check_memory(estimate)
    text = str(info.value)
    assert text.startswith("mesh.resolution = 9: needs an estimated ~") and "5242880 cells" in text
    assert "1 GB available (MemAvailable)" in text and "--no-memory-check" in text and memory.ENV_VAR in text
    memory.check_memory(memory.pde_estimate("S2", "fv", 20, "small"))  # fits
    with pytest.raises(memory.MemoryEstimateError, match="for the 4 ranks on this node"):
        memory.check_memory(memory.pde_estimate("S2", "fv", memory.cells_of("S2", 6), "x", 4), ranks_here=4)
    monkeypatch.setenv(memory.ENV_VAR, "off")
    memory.check_memory(estimate)  # the override


def test_cli_override_flag(tmp_path, monkeypatch, capsys):
    """``--no-memory-check`` runs what the guard refuses (here: a tiny mesh against a machine with 1 kB)."""
    monkeypatch.setattr(memory, "available_memory", lambda: (1000, "test"))
    monkeypatch.setenv(memory.ENV_VAR, "on")  # restored after the test (the flag sets it to off)
    out = tmp_path / "m.msh"
    assert main(["mesh", "S1", "--cells", "8", "-o", str(out)]) == 2
    assert "--cells 8: needs an estimated" in capsys.readouterr().err and not out.exists()
    assert main(["mesh", "S1", "--cells", "8", "-o", str(out), "--no-memory-check"]) == 0
    assert out.is_file()


def test_check_reports_a_job_too_big_without_building_it(tmp_path, monkeypatch):
    """S^2 level 12 (335M cells): counted, not built; the report says a run would be refused."""
    monkeypatch.setattr(memory, "available_memory", lambda: (8 * 10**9, "MemAvailable"))
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    report = check_config({"mesh": {"sphere": "S2", "resolution": 12}, "time": {"t_final": 0.1, "outputs": 1}},
                          out=tmp_path / "r")
    assert report.cells == 335544320 and report.vertices == 167772162
    assert "a run would be refused" in report.memory_state and "8 GB available" in report.memory_state
    assert "memory:      ~" in report.format()
    small = check_config({"mesh": {"sphere": "S2", "resolution": 2}, "time": {"t_final": 0.1, "outputs": 1}},
                         out=tmp_path / "r")
    assert small.memory_state.startswith("fits in") and small.cells == len(icosphere(2).cells)


def test_a_mesh_file_is_guarded_once_read(tmp_path, monkeypatch):
    """A mesh file's size is known once it is read: refused before dolfinx builds anything, nothing written."""
    from mpi4py import MPI

    import meanfield
    from meanfield.mesh import write_mesh_file

    write_mesh_file(tmp_path / "m.vtu", icosphere(3))
    config = {"mesh": {"sphere": "S2", "file": str(tmp_path / "m.vtu")}, "time": {"t_final": 0.1, "outputs": 1}}
    monkeypatch.setattr(memory, "available_memory", lambda: (10**6, "test"))
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    with pytest.raises(memory.MemoryEstimateError, match=r"^mesh\.file .*m\.vtu: needs an estimated .*1280 cells"):
        meanfield.run(config, out=tmp_path / "r", comm=MPI.COMM_SELF, quiet=True)
    assert not (tmp_path / "r").exists()


def test_a_batch_of_prompts_is_sized_by_its_engine(monkeypatch):
    """B = 2048 prompts of 32 tokens in d = 1024 (the paper's largest panel): the engine holds a chunk
    of prompts at its step's peak, the tokens and an output's gathered tokens, 8 * (32 * 1024) bytes
    per prompt twice plus two prompts' step arrays: about 1.1 GB on the particle runs' fixed cost, where
    the single run's per-token estimate (300 B per token and dimension) would say 20.7 GB.  With
    3 GB available it runs; ten times the prompts are refused naming particles.prompts."""
    from mpi4py import MPI

    from meanfield.config import load_config
    from meanfield.drivers.launch import check_size
    from meanfield.particles.prompts import prompt_memory
    from meanfield.problem import Problem

    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    monkeypatch.setattr(memory, "available_memory", lambda: (3 << 30, "MemAvailable"))

    def guard(prompts: int) -> None:
        problem = Problem(load_config({"particles": {"n": 32, "d": 1024, "prompts": prompts}}))
        check_size(problem, MPI.COMM_SELF, 32 * prompts)

    tokens = 2048 * 32 * 1024 * 8
    step = 8 * ((8 + 4) * 32 * 1024 + 3 * 32 * 32)  # a prompt at the peak of an RK4 step (module docstring)
    chunk, peak = prompt_memory(Problem(load_config({"particles": {"n": 32, "d": 1024, "prompts": 2048}})))
    assert chunk == (8 << 20) // step and peak == chunk * step + 2 * tokens
    guard(2048)
    with pytest.raises(memory.MemoryEstimateError, match=r"^particles\.prompts = 20480: "):
        guard(20480)
    assert memory.particle_estimate(2048 * 32, 1024, "x").per_rank > 20e9  # what the guard said before
