"""The figures ``meanfield plot`` draws, kept for their data and labels to be checked."""

from __future__ import annotations

from meanfield.plotting import run_plots


def figures_of(monkeypatch, run_dir, **options) -> dict:
    """The figures :func:`meanfield.plotting.plot_run_directory` saves, by file stem."""
    kept = {}
    save = run_plots._Writer.figure

    def keep(self, fig, name):
        kept[name] = fig
        save(self, fig, name)

    monkeypatch.setattr(run_plots._Writer, "figure", keep)
    run_plots.plot_run_directory(run_dir, run_dir / "again", movie=False, overwrite=True, **options)
    return kept
