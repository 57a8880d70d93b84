"""When two model times are the same: the one tolerance of the package, at two strengths.

Both are relative, on the scale ``max(1, |t|)`` (absolute below t = 1):

* :data:`TIME_TOL` (1e-12): a time and a target of the run's own stepping, which lands on it
  exactly up to the round-off of ``t + dt`` (the loop reaching an output time, a step landing
  on its end, a layer boundary, a resumed run's end time);
* :data:`MATCH_TOL` (1e-9): two times computed apart, whose round-off can add up over many
  operations (another run's output times, the multiples of an own observable's ``every``, a resumed
  run's extended output times, times a user gives): looser, so that the same time computed
  two ways is still found, and still far below any output spacing.
"""

from __future__ import annotations

#: Relative tolerance of "the run has reached this time" (its own stepping lands on it).
TIME_TOL = 1e-12
#: Relative tolerance of "the same time" for times computed apart (module docstring).
MATCH_TOL = 1e-9


def time_tol(t: float, rel: float = TIME_TOL) -> float:
    """The absolute tolerance around time ``t``: ``rel * max(1, |t|)``."""
    return rel * max(1.0, abs(t))


def same_time(a: float, b: float, rel: float = TIME_TOL) -> bool:
    """Whether ``a`` is the time ``b`` up to :func:`time_tol` of ``b``."""
    return abs(a - b) <= time_tol(b, rel)
