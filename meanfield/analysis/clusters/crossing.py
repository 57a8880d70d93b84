"""Times at which a growing quantity first reaches a level, interpolated between outputs.

Peak heights grow exponentially while the uniform state is linearly unstable and keep growing
smoothly as clusters form, so the interpolation is done on ``log(height)``: a cubic
(Lagrange) through the four outputs around the first crossing (the two bracketing it and
one more on each side; fewer at the ends of a history), solved for ``log(level)`` inside the
bracket (Brent).  Exact for exponential growth and for any cubic in log(height); otherwise the
error is ``O(dt^4 |(log h)''''| / |(log h)'|)`` for output spacing dt (second order where only
the two bracketing outputs exist).  A level already reached at the first output of a history,
or never reached, has no crossing time (nan); :func:`crossing_status` tells the two apart.
Infinite heights (a cluster that has become an atom, :mod:`.atoms`) are left out of the
interpolation; when the first output at or above the level is infinite, the crossing happened
between it and the output before, and the time of the first output showing it is returned
(known to the output spacing only).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq

#: What :func:`crossing_status` says: crossed between outputs, reached at the first output, never reached.
CROSSED, ALREADY, NEVER = "crossed", "already", "never"


def crossing_status(values: np.ndarray, level: float) -> str:
    """Whether ``values`` cross ``level`` after the first output (:data:`CROSSED`), are at or
    above it at the first output already (:data:`ALREADY`), or never reach it (:data:`NEVER`)."""
    above = np.flatnonzero(np.asarray(values, float) >= level)
    return NEVER if not len(above) else ALREADY if above[0] == 0 else CROSSED


def first_crossing(times: np.ndarray, values: np.ndarray, level: float) -> float:
    """First time ``values`` (> 0) reaches ``level``, interpolated (module docstring)."""
    times, values = np.asarray(times, float), np.asarray(values, float)
    above = np.flatnonzero(values >= level)
    if not len(above) or above[0] == 0:
        return float("nan")
    k = int(above[0])
    if not np.isfinite(values[k]):
        return float(times[k])
    lo, hi = max(k - 2, 0), min(k + 2, len(times))
    finite = np.isfinite(values[lo:hi])
    t, g = times[lo:hi][finite], np.log(values[lo:hi][finite])
    target = np.log(level)

    def cubic(s: float) -> float:
        total = 0.0
        for i in range(len(t)):
            others = np.delete(t, i)
            total += g[i] * np.prod((s - others) / (t[i] - others))
        return total - target

    return float(brentq(cubic, times[k - 1], times[k], xtol=1e-14, rtol=1e-14))
