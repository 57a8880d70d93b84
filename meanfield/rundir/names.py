"""Default output folders of the subcommands, all named after the config's run directory.

``meanfield run`` writes ``runs/<name>`` (or ``output.dir``); every other command that makes a
folder of its own puts it beside that one, named ``<name>-<suffix>`` with the details that tell
two of them apart (``runs/case-particles-n1000-s0``, ``runs/case-convergence``).  The suffix is
always added, so that a study never takes its config's run folder: the validation study of
``s1-validation.toml`` is ``runs/s1-validation-validation``, and ``meanfield run
s1-validation.toml`` still writes ``runs/s1-validation`` after it.
"""

from __future__ import annotations

from pathlib import Path


def derived_directory(run_dir: Path | str, suffix: str, *details: str) -> Path:
    """``runs/<name>-<suffix>[-<detail>...]`` beside the run directory ``run_dir`` (module docstring).

    Parameters
    ----------
    run_dir
        The config's run directory (``output.dir``, else ``runs/<name>``; a problem's
        ``output.directory``): it gives the folder and the name.
    suffix
        What the folder holds: ``"particles"``, ``"validation"``, ``"convergence"``, ...
    details
        More parts of the name, joined with ``-`` (``"n1000"``, ``"s0"``).
    """
    base = Path(run_dir)
    return base.with_name("-".join([base.name, suffix, *details]))


def run_name(run_dir: Path | str) -> str:
    """The name of the run in ``run_dir``: the directory's own name, as ``--out`` (or the default) gives it.

    The log and metadata.json both call the run by it, so a run is named the same wherever it
    is reported; the config's ``name`` only chooses the default directory.
    """
    return Path(run_dir).absolute().name
