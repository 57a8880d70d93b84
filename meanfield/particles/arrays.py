"""The array library of the batched token engine: numpy, or JAX on a CPU or a GPU.

The engine (:mod:`meanfield.particles.batch`) is written once against the array namespace an
:class:`ArrayBackend` hands it (``numpy`` or ``jax.numpy``), in float64 by default or float32 on
request.  JAX is the GPU library (the optional extra ``meanfield[gpu]``): its CPU wheel installs
from PyPI in seconds and runs the same code on a CPU, so CI tests the GPU path against numpy
without a GPU; PyTorch's PyPI wheels pull gigabytes of CUDA libraries.

JAX is imported only when a JAX backend is made (``import meanfield`` and the numpy engine never
import it).  JAX computes in float32 unless its global ``jax_enable_x64`` flag is on; a float64
backend turns it on only inside :meth:`ArrayBackend.context` (JAX's thread-local
``enable_x64`` context manager), so other JAX code in the process keeps its own setting.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The array libraries of the engine.
LIBRARIES: tuple[str, ...] = ("numpy", "jax")
#: The devices: ``"cpu"``, or ``"gpu"`` (JAX only).
DEVICES: tuple[str, ...] = ("cpu", "gpu")
#: The floating-point precisions.
PRECISIONS: tuple[str, ...] = ("float64", "float32")


class BackendError(ValueError):
    """An array library or device that is not there (or not a valid choice); the message names the field."""


def _jax_module(field: str) -> Any:
    try:
        import jax
    except ImportError:
        raise BackendError(f"{field}: 'jax' needs JAX, which is not installed (pip install 'meanfield[gpu]', "
                           "or jax[cuda12] for a GPU)") from None
    return jax


def _jax_device(jax: Any, device: str, field: str) -> Any:
    platform = "cpu" if device == "cpu" else "gpu"
    try:
        devices = jax.devices(platform)
    except RuntimeError:
        devices = []
    if not devices:
        raise BackendError(f"{field}: no {device.upper()} device is visible to JAX (found "
                           f"{', '.join(sorted({d.platform for d in jax.devices()}))}); use device = 'cpu' or "
                           "install jax with CUDA support")
    return devices[0]


@dataclass(frozen=True)
class ArrayBackend:
    """An array library on a device at a precision (see the module docstring).

    Build it with :meth:`make`, which checks the choices and that the library and device are
    there.  ``xp`` is the namespace the engine computes with.
    """

    library: str = "numpy"
    device: str = "cpu"
    precision: str = "float64"
    xp: Any = np
    _device: Any = None

    @classmethod
    def make(cls, library: str = "numpy", device: str = "cpu", precision: str = "float64",
             field: str = "particles.device") -> ArrayBackend:
        """The backend of ``library`` on ``device`` at ``precision``.

        Raises
        ------
        BackendError
            An unknown choice, JAX missing, a GPU asked of numpy, or no such device (one line
            naming ``field``).
        """
        if library not in LIBRARIES:
            raise BackendError(f"{field}: the array library must be one of {list(LIBRARIES)}, got {library!r}")
        if device not in DEVICES:
            raise BackendError(f"{field}: must be one of {list(DEVICES)}, got {device!r}")
        if precision not in PRECISIONS:
            raise BackendError(f"particles.precision: must be one of {list(PRECISIONS)}, got {precision!r}")
        if library == "numpy":
            if device != "cpu":
                raise BackendError(f"{field}: the numpy engine runs on the CPU only; 'gpu' needs the jax engine")
            return cls("numpy", "cpu", precision, np, None)
        jax = _jax_module(field)
        import jax.numpy as jnp

        return cls("jax", device, precision, jnp, _jax_device(jax, device, field))

    @classmethod
    def for_device(cls, device: str, precision: str = "float64", field: str = "particles.device") -> ArrayBackend:
        """numpy on ``"cpu"``, JAX on ``"gpu"``: the backend a device name asks for."""
        return cls.make("jax" if device == "gpu" else "numpy", device, precision, field)

    @property
    def is_jax(self) -> bool:
        return self.library == "jax"

    @property
    def dtype(self) -> Any:
        """The floating-point type of the engine's arrays."""
        return getattr(self.xp, self.precision)

    @property
    def itemsize(self) -> int:
        """Bytes per number."""
        return int(np.dtype(self.precision).itemsize)

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        """Where the engine computes: JAX's float64 switched on (thread-locally) and its device chosen."""
        if not self.is_jax:
            yield
            return
        import jax

        x64 = jax.enable_x64(self.precision == "float64") if hasattr(jax, "enable_x64") else \
            jax.experimental.enable_x64(self.precision == "float64")  # type: ignore[attr-defined]  # jax < 0.7
        with x64, jax.default_device(self._device):
            yield

    def asarray(self, a: Any) -> Any:
        """``a`` as an array of the engine's precision on its device (call inside :meth:`context`)."""
        return self.xp.asarray(np.asarray(a, dtype=self.precision))

    def to_numpy(self, a: Any) -> np.ndarray:
        """An engine array back on the host as a numpy array."""
        return np.asarray(a)

    def compile(self, function: Callable[..., Any], static: tuple[int, ...] = ()) -> Callable[..., Any]:
        """``function`` compiled (``jax.jit``, arguments ``static`` by position fixed at compile time)
        or as it is (numpy)."""
        if not self.is_jax:
            return function
        import jax

        return jax.jit(function, static_argnums=static)

    def repeat(self, count: Any, body: Callable[[Any], Any], x: Any) -> Any:
        """``body`` applied ``count`` times to ``x``: a Python loop (numpy) or ``lax.fori_loop``
        (JAX, inside a compiled function, ``count`` traced: no recompilation per count)."""
        if not self.is_jax:
            for _ in range(int(count)):
                x = body(x)
            return x
        from jax import lax

        return lax.fori_loop(0, count, lambda _, y: body(y), x)

    def describe(self) -> str:
        """E.g. ``"numpy float64 on the CPU"``."""
        return f"{self.library} {self.precision} on the {self.device.upper()}"
