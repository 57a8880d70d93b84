"""Process settings for numerical throughput: threads per MPI rank, and the C allocator.

Threads (one per rank by default).

meanfield parallelises over MPI ranks.  Threaded BLAS inside every rank oversubscribes the
cores of a node (ranks x BLAS threads), and even a single rank on a small shared machine runs
slower with the BLAS default than with one thread.  The run drivers therefore call
:func:`configure_threads` once at start-up:

* ``configure_threads()`` -- the number of threads comes from the environment variable
  ``MEANFIELD_NUM_THREADS`` when it is set, else 1;
* ``configure_threads(n)`` -- ``n`` threads (an explicit config value wins over the
  environment).

It limits the BLAS and OpenMP thread pools of the process through ``threadpoolctl`` (no
environment hacks; the limits hold until the process ends or the function is called again)
and records ``n`` for the calls that take a thread count themselves (ducc0's transforms),
which read it with :func:`num_threads`.

A limit reaches only the libraries loaded when it is set, and a process holds several
OpenBLAS copies: numpy's and scipy's (each bundles its own ``libscipy_openblas``, threaded),
and those bundled with PETSc (dolfinx-solver-real) and basix (built without threads: always
1).  :func:`configure_threads` therefore loads scipy's first (scipy.linalg), so that none
starts later with the machine's core count; :func:`blas_libraries` lists each library once,
with the package that bundles it and the threads it uses now (what ``meanfield info`` prints
and what a run records in metadata.json).

Allocator.  Every field evaluation and time step creates and frees arrays of a few to a few
hundred megabytes (values at every mesh point or token).  glibc hands such blocks back to the
kernel on ``free`` and maps fresh zeroed pages on the next ``malloc``, so the same arrays
page-fault on every call; on the hot paths this costs as much as the arithmetic.
:func:`retain_freed_memory` (also called at run start) makes glibc serve them from the heap
and keep freed memory for reuse.  The process's resident memory then stays at its peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

#: Environment variable that sets the thread count when the caller gives none.
ENV_VAR = "MEANFIELD_NUM_THREADS"

_state: dict = {"threads": 1, "limiter": None}


def _from_environment() -> int:
    raw = os.environ.get(ENV_VAR)
    if raw is None or not raw.strip():
        return 1
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{ENV_VAR}: must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{ENV_VAR}: must be a positive integer, got {raw!r}")
    return value


def configure_threads(n: int | None = None) -> int:
    """Limit BLAS/OpenMP pools to ``n`` threads and use ``n`` in ducc0 calls; returns ``n``.

    Parameters
    ----------
    n
        Threads per process (per MPI rank).  ``None``: ``MEANFIELD_NUM_THREADS`` if set,
        else 1.

    Raises
    ------
    ValueError
        If ``n`` (or the environment variable) is not a positive integer.
    """
    if n is None:
        n = _from_environment()
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"threads: must be a positive integer, got {n!r}")
    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS now, so that the limit reaches it)
    from threadpoolctl import threadpool_limits

    previous = _state["limiter"]
    if previous is not None:
        previous.restore_original_limits()
    _state["limiter"] = threadpool_limits(limits=n)
    _state["threads"] = n
    return n


def blas_libraries() -> list[dict[str, object]]:
    """The BLAS libraries loaded in this process, each once: the package that bundles it (from its
    path), its version, threading layer (``disabled``: built without threads) and threads now."""
    from threadpoolctl import threadpool_info

    seen: dict[str, dict[str, object]] = {}
    for lib in threadpool_info():
        if lib.get("user_api") != "blas" or lib["filepath"] in seen:
            continue
        parts = lib["filepath"].replace("\\", "/").split("/")
        folder = parts[-2] if len(parts) > 1 else ""
        bundled = folder.removesuffix(".libs").replace("_", "-")
        if bundled == "lib" and len(parts) > 2:  # dolfinx_solver/lib/libopenblas.so
            bundled = parts[-3].replace("_", "-")
        seen[lib["filepath"]] = {"library": lib.get("internal_api"), "bundled_with": bundled,
                                 "version": lib.get("version"), "threading": lib.get("threading_layer"),
                                 "num_threads": lib.get("num_threads"), "path": lib["filepath"]}
    return list(seen.values())


def num_threads() -> int:
    """Threads the numerical kernels that take a thread count should use (default 1)."""
    return _state["threads"]


#: glibc's ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def retain_freed_memory(limit: int = 1 << 30) -> bool:
    """Serve allocations up to ``limit`` bytes from the heap and keep freed heap memory for
    reuse (glibc ``mallopt``); returns False where that is not available (not glibc).

    Parameters
    ----------
    limit
        Largest block served from the heap; bigger blocks are still mapped and unmapped.
    """
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_MMAP_THRESHOLD, int(limit))) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
