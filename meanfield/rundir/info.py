"""``meanfield info RUN`` for people: the facts of :func:`~meanfield.rundir.results.describe` as
a few aligned lines (``--json`` prints the facts themselves)."""

from __future__ import annotations

from typing import Any

from ..masks import make_mask
from ..memory import format_bytes
from ..wording import counted, format_duration


def _wall(seconds: float | None) -> str:
    return "unknown" if seconds is None else f"{seconds:.1f} s" if seconds < 60 else format_duration(seconds)


def format_description(facts: dict[str, Any]) -> str:
    """The status, time reached, wall time, segments and files of a run, one fact per line.

    Parameters
    ----------
    facts
        What :func:`~meanfield.rundir.results.describe` returns.
    """
    lines = [f"run:        {facts['name']} ({facts['kind']} run in {facts['path']})",
             f"status:     {facts['status']}" + (f" (by {facts['interrupted_by']})" if facts.get("interrupted_by")
                                                  else "")]
    lines += make_mask(facts.get("mask", "none"), {"slices": facts.get("slices")}).info(facts["kind"])
    if facts.get("error"):
        lines.append(f"error:      {facts['error']}")
    reached, final = facts.get("t_reached"), facts.get("t_final")
    if reached is not None and final:
        lines.append(f"t reached:  {reached:.6g} of t_final = {final:.6g} ({100 * reached / final:.0f}%)")
    progress = facts.get("progress")
    if facts["status"] == "running" and progress:
        eta = format_duration(progress["eta_s"]) if progress.get("eta_s") is not None else "unknown"
        dt = f", dt = {progress['dt']:.3g}" if progress.get("dt") is not None else ""
        lines.append(f"progress:   step {progress['step']}{dt}, ETA {eta} (at {progress.get('eta')}; "
                     f"updated {progress.get('updated')})")
    segments = facts.get("segments") or []
    lines.append(f"wall time:  {_wall(facts.get('wall_s'))} in {counted(len(segments), 'segment')}")
    for s in segments:
        end = f"{s['t_end']:.6g}" if s.get("t_end") is not None else "?"
        lines.append(f"            {s.get('command', '?'):<7} {s.get('started', '?')}  "
                     f"{counted(s.get('ranks') or 0, 'rank')}  t = {s.get('t_start', 0):.6g} -> {end}  "
                     f"{_wall(s.get('wall_s'))}")
    if facts.get("atoms"):
        lines.append(f"atoms:      {facts['atoms']['count']} at the last output, mass {facts['atoms']['mass']:.6g}")
    files = facts.get("files") or {}
    snapshots = {name: size for name, size in files.items() if "/" in name}
    lines.append(f"files:      {counted(len(files), 'file')}, {format_bytes(sum(files.values()))}")
    lines += [f"            {name:<26} {format_bytes(size)}" for name, size in files.items() if "/" not in name]
    folders = sorted({name.split("/")[0] for name in snapshots})
    for folder in folders:
        inside = [size for name, size in snapshots.items() if name.startswith(folder + "/")]
        lines.append(f"            {folder + '/':<26} {format_bytes(sum(inside))} in {counted(len(inside), 'file')}")
    return "\n".join(lines)
