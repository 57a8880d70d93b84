"""Work done on rank 0 alone whose outcome every rank must learn.

Files, plots and serial mesh generation happen on rank 0 between collective steps.  If that
work raised on rank 0 only, the other ranks would wait in the next collective forever; so
:func:`on_root` broadcasts either the result or the error, and every rank returns or
raises together.
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")


def on_root(comm, work: Callable[[], T], error_type: type[Exception] = RuntimeError) -> T:
    """Run ``work()`` on rank 0 and return its result on every rank (collective).

    An exception on rank 0 is re-raised on every rank: as itself on rank 0, and on the others
    as ``error_type`` (or as the same type when it is a ValueError, so bad input stays bad
    input) with the same message.
    """
    result, error = None, None
    if comm.rank == 0:
        try:
            result = work()
        except Exception as exc:  # noqa: BLE001 - re-raised below, on every rank
            error = exc
    message = comm.bcast(None if error is None else (isinstance(error, ValueError), str(error)), root=0)
    if error is not None:
        raise error
    if message is not None:
        is_input_error, text = message
        raise (ValueError if is_input_error and not issubclass(error_type, ValueError) else error_type)(text)
    return comm.bcast(result, root=0)
