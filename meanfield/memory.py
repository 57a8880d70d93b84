"""Memory a job needs, estimated from its sizes before anything is built, and the guard that
refuses a job bigger than the machine.

The estimate is linear in the size of the job: a fixed cost of the process (Python, numpy,
dolfinx, PETSc, MPI) plus bytes per cell of the mesh (per scheme and sphere), per token of a
particle system, or per cell of a mesh file written by ``meanfield mesh``.  The coefficients
are fitted to the peak resident memory (``ru_maxrss``) measured in a fresh process at several
sizes, rounded up (the measurements and the command that makes them are in
``benchmarks/memory_estimate.py``; ``tests/test_memory_guard.py`` checks the estimate against
a measured run).  Under MPI the mesh is split between the ranks, except what rank 0 holds
whole (the serial mesh it reads or generates and distributes, and the global arrays it
writes): rank 0 is the largest, and its estimate is the one reported.

:func:`check_memory` compares what the ranks on this node need with the memory available to
the process -- the smaller of the cgroup's limit less its usage (cgroup v2 or v1) and the
kernel's ``MemAvailable`` -- and raises :class:`MemoryEstimateError` (bad input: exit 2, one
line naming the setting and the estimate) when it does not fit.  ``MEANFIELD_MEMORY_CHECK=off``
(or the command-line flag ``--no-memory-check``, which sets it for the process) skips the
refusal for users who know better (swap, a machine whose memory the process cannot see).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from .spheres import sphere_named

#: Environment variable: ``off`` skips the refusal (the estimate is still computed and printed by ``check``).
ENV_VAR = "MEANFIELD_MEMORY_CHECK"

# Coefficients: measured peaks (one rank unless said) in MB, and what the estimate gives.
#: Peak resident memory of a small run (imports, MPI, PETSc): measured 223-225 MB.
BASE = 240e6
# Peak resident bytes per cell of a PDE run, by (sphere, scheme), one rank: the spheres' descriptors'
# ``bytes_per_cell`` (:mod:`meanfield.spheres`; fitted slopes ~960, ~3900, ~480, ~1270 B/cell, rounded up).
# Measured -> estimated: S2 FV level 7 525 -> 600, level 8 1469 -> 1682; S2 DG1 level 6 523 -> 568, level 7
# 1479 -> 1551; S1 FV 2**20 cells 721 -> 817; S1 DG1 2**19 887 -> 974.
#: Part of the bytes per cell that rank 0 holds whole under MPI: the measured peak of the largest of 2 ranks is half
#: the serial one plus 1-2% (S2 FV level 8: 852 -> 1033 MB, DG1 level 7: 866 -> 961 MB); 0.1 leaves a margin.
ROOT_SHARE = 0.1
#: A particle run: a fixed cost (the base and the field evaluator's blocks) and bytes per token per
#: dimension of R^d.  S2 (d = 3) 1e5 tokens 549 -> 640, 1e6 tokens 1267 -> 1450; S1 1e6 tokens 851 -> 1150.
PARTICLE_BASE, PER_TOKEN_PER_DIM = 550e6, 300.0
#: Fixed cost and bytes per cell of ``meanfield mesh`` (no dolfinx imported): level 7 135 -> 166, level 8
#: 292 -> 362.
MESH_BASE, MESH_PER_CELL = 100e6, 200.0


#: Where the kernel shows the process's control groups and its memory (tests point them elsewhere).
CGROUP_ROOT, PROC = Path("/sys/fs/cgroup"), Path("/proc")


class MemoryEstimateError(ValueError):
    """A job whose estimated memory exceeds what is available (bad input; nothing was written)."""


@dataclass(frozen=True)
class Estimate:
    """Estimated peak memory of a job.

    Attributes
    ----------
    what
        The setting that sets the size, as the user wrote it (``mesh.resolution = 12``).
    size
        What is counted (``335544320 cells``).
    per_rank
        Bytes on the largest rank (rank 0).
    ranks
        Ranks of the job the estimate is for.
    """

    what: str
    size: str
    per_rank: float
    ranks: int = 1

    def format(self) -> str:
        """``~1.2 GB per rank (335544320 cells, 1 rank)``."""
        ranks = f"{self.ranks} rank{'s' if self.ranks > 1 else ''}"
        return f"~{format_bytes(self.per_rank)} per rank ({self.size}, {ranks})"


def format_bytes(n: float) -> str:
    """Bytes in decimal units: ``1.23 GB`` (beyond petabytes: ``1.6e+48 B``)."""
    if n >= 1e18:
        return f"{n:.3g} B"
    power = min(int(math.log10(max(n, 1.0)) // 3), 5)
    return f"{n / 1000 ** power:.3g} {('B', 'kB', 'MB', 'GB', 'TB', 'PB')[power]}"


def count(n: int) -> str:
    """A count for a message: exact up to 10**12, then ``8.03e+60``."""
    return str(n) if n < 10**12 else f"{float(n):.3g}"


def cells_of(sphere: str, resolution: int) -> int:
    """Cells of a generated mesh (S^2: icosphere level, 20 * 4**level; S^1: the resolution), without building it."""
    return sphere_named(sphere).cells(resolution)


def pde_estimate(sphere: str, scheme: str, cells: int, what: str, ranks: int = 1,
                 slices: int | None = None) -> Estimate:
    """Peak memory of rank 0 of a PDE run of ``cells`` cells on ``ranks`` ranks; a causal run of
    ``slices`` position slices counts every cell ``slices`` times (an upper bound, not measured:
    the states, stages and outputs grow with the slices, the field evaluator does not)."""
    per_cell = sphere_named(sphere).bytes_per_cell[scheme] * (slices or 1)
    share = ROOT_SHARE + (1.0 - ROOT_SHARE) / max(ranks, 1)
    size = f"{count(cells)} cells" + (f" x {slices} position slices" if slices else "")
    return Estimate(what, size, BASE + per_cell * share * cells, ranks)


def particle_estimate(n: int, d: int, what: str, ranks: int = 1) -> Estimate:
    """Peak memory of rank 0 of a particle run of ``n`` tokens in R^d (rank 0 gathers them all to write)."""
    return Estimate(what, f"{count(n)} tokens", PARTICLE_BASE + PER_TOKEN_PER_DIM * d * n, ranks)


def batch_estimate(engine: float, prompts: int, n: int, ranks: int = 1) -> Estimate:
    """Peak memory of rank 0 of a run of ``prompts`` prompts of ``n`` tokens whose batched engine
    holds ``engine`` bytes at its peak (:func:`meanfield.particles.batch.engine_peak`: a chunk of
    prompts, the rank's tokens, an output's gathered tokens), on the particle runs' fixed cost."""
    return Estimate(f"particles.prompts = {prompts}", f"{count(prompts)} prompts of {count(n)} tokens",
                    PARTICLE_BASE + engine, ranks)


def mesh_estimate(sphere: str, cells: int, what: str) -> Estimate:
    """Peak memory of generating and writing a mesh of ``cells`` cells (``meanfield mesh``)."""
    return Estimate(what, f"{count(cells)} cells", MESH_BASE + MESH_PER_CELL * cells)


def problem_estimate(problem, ranks: int = 1, tokens: int | None = None) -> Estimate | None:
    """The estimate of a PDE run (``tokens`` None) or a particle run of a :class:`~meanfield.problem.Problem`.

    ``None`` for a PDE run on a mesh file (its size is known once the file is read).
    """
    if tokens is not None:
        return particle_estimate(tokens, problem.particles.d, f"particles.n = {tokens}", ranks)
    if problem.mesh.cells is None:
        return None
    return pde_estimate(problem.sphere, problem.scheme.kind, problem.mesh.cells,
                        f"mesh.resolution = {problem.mesh.resolution}", ranks, problem.mask.slices)


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat(path: Path, key: str) -> int:
    """One entry of a cgroup's memory.stat (0 if absent)."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _cgroup_room() -> tuple[int, str] | None:
    """The cgroup's memory limit less its usage, if the process has a limit (v2, then v1).

    The usage does not count the inactive page cache (``inactive_file`` of memory.stat), which
    the kernel reclaims before it runs out: a group full of cached files still has that room.
    """
    root = CGROUP_ROOT
    own = ""
    try:
        for line in (PROC / "self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                own = line[3:].strip("/")
    except OSError:
        pass
    for folder in (root / own, root):  # the process's own group, or the namespace's root
        limit, usage = _read_int(folder / "memory.max"), _read_int(folder / "memory.current")
        if limit is not None and usage is not None:
            usage -= _stat(folder / "memory.stat", "inactive_file")
            return limit - usage, "cgroup memory.max less memory.current"
    v1 = root / "memory"
    limit, usage = _read_int(v1 / "memory.limit_in_bytes"), _read_int(v1 / "memory.usage_in_bytes")
    if limit is not None and usage is not None and limit < 1 << 60:  # v1 reports "no limit" as ~2**63
        usage -= _stat(v1 / "memory.stat", "total_inactive_file")
        return limit - usage, "cgroup memory.limit_in_bytes less memory.usage_in_bytes"
    return None


def _mem_available() -> int | None:
    try:
        for line in (PROC / "meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_memory() -> tuple[int, str] | None:
    """Bytes this process may still use and where that number comes from; ``None`` if unknown."""
    found = [room for room in (_cgroup_room(),) if room is not None]
    available = _mem_available()
    if available is not None:
        found.append((available, "MemAvailable"))
    return min(found, key=lambda room: room[0]) if found else None


def guard_disabled() -> bool:
    """True when ``MEANFIELD_MEMORY_CHECK=off`` (or ``--no-memory-check``)."""
    return os.environ.get(ENV_VAR, "").strip().lower() in ("off", "0", "no", "false")


def disable_guard() -> None:
    """Skip the refusal in this process and the processes it starts (``--no-memory-check``)."""
    os.environ[ENV_VAR] = "off"


def check_memory(estimate: Estimate | None, ranks_here: int = 1) -> None:
    """Refuse a job whose ``ranks_here`` ranks on this node would need more than is available.

    Raises
    ------
    MemoryEstimateError
        One line: the setting, the estimate, what is available and how to go on anyway.
    """
    if estimate is None or guard_disabled():
        return
    room = available_memory()
    if room is None:
        return
    need = estimate.per_rank * max(ranks_here, 1)
    if need > room[0]:
        node = f", {format_bytes(need)} for the {ranks_here} ranks on this node" if ranks_here > 1 else ""
        raise MemoryEstimateError(
            f"{estimate.what}: needs an estimated {estimate.format()}{node}, more than the "
            f"{format_bytes(room[0])} available ({room[1]}); make the job smaller or spread it over more nodes, "
            f"or pass --no-memory-check (or set {ENV_VAR}=off) to run it anyway")


def ranks_on_node(comm) -> int:
    """Ranks of ``comm`` on this node (collective)."""
    from mpi4py import MPI

    if comm is None or comm.size == 1:
        return 1
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return int(local.size)
    finally:
        local.Free()
