"""The package version (one place; ``meanfield.__version__`` and the files a run writes read it)."""

__version__ = "0.2.0"
