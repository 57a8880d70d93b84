"""Threads per rank: BLAS/OpenMP pools limited through threadpoolctl, ducc0's count recorded."""

from __future__ import annotations

import numpy  # noqa: F401  (loads the BLAS whose pool is checked)
import pytest
from threadpoolctl import threadpool_info

from meanfield import threads


@pytest.fixture(autouse=True)
def restore():
    yield
    threads.configure_threads(1)


def blas_threads() -> set[int]:
    """Threads of every BLAS pool loaded (single-threaded builds, such as those bundled with
    basix and PETSc, always report 1)."""
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_default_is_one_thread(monkeypatch):
    monkeypatch.delenv(threads.ENV_VAR, raising=False)
    assert threads.configure_threads() == 1
    assert threads.num_threads() == 1
    assert blas_threads() == {1}


def test_environment_and_explicit_values(monkeypatch):
    monkeypatch.setenv(threads.ENV_VAR, "2")
    assert threads.configure_threads() == 2 and threads.num_threads() == 2
    assert 2 in blas_threads() <= {1, 2}  # numpy's BLAS follows
    assert threads.configure_threads(1) == 1  # an explicit value wins over the environment
    assert blas_threads() == {1}


@pytest.mark.parametrize("bad", ["0", "two", "-1"])
def test_bad_environment_value(monkeypatch, bad):
    monkeypatch.setenv(threads.ENV_VAR, bad)
    with pytest.raises(ValueError, match=threads.ENV_VAR):
        threads.configure_threads()


@pytest.mark.parametrize("bad", [0, 1.5, True])
def test_bad_explicit_value(bad):
    with pytest.raises(ValueError, match="threads"):
        threads.configure_threads(bad)


def test_retained_memory_is_set_where_glibc_is():
    """retain_freed_memory sets glibc's malloc options (both mallopt calls succeed) and reports
    False where there is no glibc.  What it saves (the page faults of allocating a large array
    again after freeing one) depends on the allocator's version and is measured by
    benchmarks/bench_memory_reuse.py, not asserted here."""
    import platform

    assert threads.retain_freed_memory() is (platform.libc_ver()[0] == "glibc")
