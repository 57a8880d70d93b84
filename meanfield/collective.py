"""Work whose failure on any one rank every rank must learn, so that no rank waits for ever.

Files, plots and serial mesh generation happen on rank 0 between collective steps; reading
a rank's own part of something happens on every rank.  If such work raised on some ranks
only, the others would wait in the next collective forever.  :func:`on_root` and
:func:`everywhere` therefore end with one collective that tells every rank whether any rank
failed, and then every rank returns, or every rank raises:

* on a rank where the work raised, the original exception;
* on the others, :class:`RemoteInputError` (a ``ValueError``: bad input stays bad input) when
  the failing rank raised a ``ValueError`` or ``FileNotFoundError``, else
  :class:`RemoteRunError` (a ``RuntimeError``), with the same message, naming the rank.

Rule used throughout the package: every collective (MPI) call is entered by every rank; work
that may fail on some ranks only (I/O above all) runs inside one of these two functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeVar, overload

T = TypeVar("T")

INPUT_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError)


class CollectiveFailure(Exception):
    """Mixin of errors raised on every rank alike (decided from collective data), so that no
    rank is left waiting: a run may end with them normally.  Any other error inside a
    collective step may have happened on one rank alone."""


class RemoteInputError(CollectiveFailure, ValueError):
    """Bad input detected on another rank (the message is that rank's)."""


class RemoteRunError(CollectiveFailure, RuntimeError):
    """A run-time failure on another rank (the message is that rank's)."""


def is_collective(error: BaseException) -> bool:
    """True if ``error`` is known to be raised on every rank alike (no rank is left waiting):
    a :class:`CollectiveFailure`, an error re-raised by :func:`on_root` / :func:`everywhere`,
    or bad input (a ``ValueError`` or ``FileNotFoundError``: decided from the config, which
    every rank shares)."""
    return isinstance(error, (CollectiveFailure, *INPUT_ERRORS)) or bool(getattr(error, "collective", False))


def raised_everywhere(error: BaseException) -> bool:
    """True if ``error`` is known to be raised on every rank alike: a :class:`CollectiveFailure`
    or an error re-raised by :func:`on_root` / :func:`everywhere`.  Unlike :func:`is_collective`,
    bad input is not assumed: inside a time step (the config checked long before) a
    ``ValueError`` is a failure that may be one rank's alone."""
    return isinstance(error, CollectiveFailure) or bool(getattr(error, "collective", False))


def _mark(error: BaseException) -> BaseException:
    try:
        error.collective = True  # type: ignore[attr-defined]
    except AttributeError:  # an exception type without instance attributes
        pass
    return error


def _describe(error: BaseException) -> tuple[bool, str]:
    return isinstance(error, INPUT_ERRORS), str(error) or type(error).__name__


def _raise_remote(report: tuple[int, bool, str], error_type: type[Exception] | None) -> None:
    rank, is_input, text = report
    if error_type is not None and (issubclass(error_type, ValueError) == is_input):
        raise error_type(text)
    raise (RemoteInputError if is_input else RemoteRunError)(text if rank == 0 else f"rank {rank}: {text}")


@overload
def on_root(comm, work: Callable[[], T], error_type: type[Exception] | None = None, *,
            broadcast: Literal[True] = True) -> T: ...


@overload
def on_root(comm, work: Callable[[], T], error_type: type[Exception] | None = None, *,
            broadcast: Literal[False]) -> T | None: ...


def on_root(comm, work: Callable[[], T], error_type: type[Exception] | None = None, *,
            broadcast: bool = True) -> T | None:
    """Run ``work()`` on rank 0 and return its result on every rank (collective).

    Parameters
    ----------
    comm
        Communicator (``None``: serial, ``work`` is simply called).
    work
        The function; its result is broadcast (it must be picklable).
    error_type
        Exception class raised on the other ranks when rank 0 fails (default:
        :class:`RemoteInputError` for input errors, :class:`RemoteRunError` otherwise); used only
        when it is of the same kind (input or run time) as rank 0's error.
    broadcast
        ``False``: the result stays on rank 0 (an object that only rank 0 may hold, such as an
        open run directory or a whole mesh), and the other ranks get ``None``.
    """
    if comm is None or comm.size == 1:
        try:
            return work()
        except Exception as exc:
            raise _mark(exc) from None
    result, error = None, None
    if comm.rank == 0:
        try:
            result = work()
        except Exception as exc:  # noqa: BLE001 - re-raised below, on every rank
            error = exc
    report = comm.bcast(None if error is None else (0, *_describe(error)), root=0)
    if error is not None:
        raise _mark(error)
    if report is not None:
        _raise_remote(report, error_type)
    return comm.bcast(result, root=0) if broadcast else result


def everywhere(comm, work: Callable[[], T], error_type: type[Exception] | None = None) -> T:
    """Run ``work()`` on every rank; if it raises on any rank, raise on every rank (collective).

    Returns this rank's result.  The lowest failing rank's error is the one reported on the
    ranks that did not fail themselves.
    """
    error = None
    try:
        result = work()
    except Exception as exc:  # noqa: BLE001 - re-raised below, on every rank
        error, result = exc, None
    if comm is None or comm.size == 1:
        if error is not None:
            raise _mark(error)
        return result  # type: ignore[return-value]
    reports = comm.allgather(None if error is None else (comm.rank, *_describe(error)))
    if error is not None:
        raise _mark(error)
    failed = [r for r in reports if r is not None]
    if failed:
        _raise_remote(failed[0], error_type)
    return result  # type: ignore[return-value]
