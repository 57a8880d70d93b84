"""Random points on spheres."""

from __future__ import annotations

import numpy as np


def random_sphere_points(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    """n points uniform on S^{d-1}."""
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1)[:, None]
