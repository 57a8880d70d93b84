"""Option values given as text: comma-separated numbers, a direction on the sphere."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def numbers(text: str, option: str) -> list[float]:
    """Comma-separated numbers of an option (ValueError naming it)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{option} {text}: expected comma-separated numbers") from None
    if not values:
        raise ValueError(f"{option} {text}: expected at least one number")
    return values


def direction(text: str):
    """``--centre LON,LAT`` (degrees) as a unit vector of R^3 (ValueError naming the option)."""
    import numpy as np

    values = numbers(text, "--centre")
    if len(values) != 2 or not -90 <= values[1] <= 90 or not np.isfinite(values[0]):
        raise ValueError(f"--centre {text}: expected LON,LAT in degrees, latitude in [-90, 90]")
    lon, lat = np.radians(values)
    return np.array([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])


def number_list(number_type: type, what: str) -> Callable[[str], list]:
    """An argparse type: comma-separated values of ``number_type`` (``what`` names them in errors)."""

    def parse(text: str) -> list:
        try:
            values = [number_type(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}s, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one {what}")
        return values

    return parse
