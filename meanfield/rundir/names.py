"""Default output folders of the subcommands, all named after the config's run directory.

``meanfield run`` writes ``runs/<name>`` (or ``output.dir``); every other command that makes a
folder of its own puts it beside that one, named ``<name>-<kind>`` with the details that tell
two of them apart (``runs/case-particles-n1000-s0``, ``runs/case-convergence``).  A name that
already ends with ``-<kind>`` is not suffixed twice: the validation study of
``s1-validation.toml`` is ``runs/s1-validation``.
"""

from __future__ import annotations

from pathlib import Path


def derived_directory(base: Path, kind: str, *details: str) -> Path:
    """``runs/<name>-<kind>[-<detail>...]`` beside the config's run directory (module docstring).

    Parameters
    ----------
    base
        The config's run directory (``output.dir``, else ``runs/<name>``: the problem's
        ``output.directory``); it gives the folder and the name.
    kind
        What the folder holds: ``"particles"``, ``"validation"``, ``"convergence"``, ...
    details
        More parts of the name, joined with ``-`` (``"n1000"``, ``"s0"``).
    """
    name = base.name if base.name == kind or base.name.endswith(f"-{kind}") else f"{base.name}-{kind}"
    return base.with_name("-".join([name, *details]))


def run_name(path: Path | str) -> str:
    """The name of the run in ``path``: the directory's own name, as ``--out`` (or the default) gives it.

    The log and metadata.json both call the run by it, so a run is named the same wherever it
    is reported; the config's ``name`` only chooses the default directory.
    """
    return Path(path).absolute().name
