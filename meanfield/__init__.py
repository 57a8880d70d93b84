"""meanfield: the mean-field PDE of self-attention dynamics on meshed spheres.

The Python API mirrors the CLI::

    import meanfield
    cfg = meanfield.load_config("runs/examples/s2-clustering.toml", ["time.t_final=2"])
    result = meanfield.run(cfg)            # same as `meanfield run ...`, also under mpirun
    result = meanfield.load_run("runs/s2-clustering")

Importing this package is cheap: dolfinx and MPI are imported when a run starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["load_config", "run", "load_run", "AttentionModel", "Config", "RunResult"]

_LAZY = {
    "load_config": ("config", "load_config"),
    "Config": ("config", "Config"),
    "run": ("solver", "run"),
    "load_run": ("io", "load_run"),
    "RunResult": ("io", "RunResult"),
    "AttentionModel": ("model", "AttentionModel"),
}

if TYPE_CHECKING:
    from .config import Config, load_config
    from .io import RunResult, load_run
    from .model import AttentionModel
    from .solver import run


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'meanfield' has no attribute {name!r}")
