"""Words in messages: counted nouns (``1 rank``, ``2 ranks``) and durations (``4m05s``, ``3.2 ms``)."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 point"``, ``"3 points"``: ``n`` and the noun in the number ``n`` asks for.

    Parameters
    ----------
    n
        The count.
    noun
        The singular noun.
    plural
        The plural where it is not ``noun + "s"``.
    """
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def format_duration(seconds: float) -> str:
    """``4m05s``, ``2h03m10s``; ``unknown`` for an infinite time."""
    if seconds == float("inf"):
        return "unknown"
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m{seconds % 60:02d}s" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


def format_seconds(seconds: float) -> str:
    """``12 us``, ``3.2 ms``, ``45.1 s`` (three significant digits); ``? s`` for an unknown (NaN) time."""
    if seconds != seconds:
        return "? s"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"
