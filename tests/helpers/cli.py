"""The CLI in-process: small cases and the check that bad input is refused."""

from __future__ import annotations

from pathlib import Path

from meanfield.cli import main

S2 = 'name = "x"\n[mesh]\nsphere = "S2"\nresolution = 1\n[time]\nt_final = 0.2\noutputs = 1\n'
S1 = 'name = "x"\n[mesh]\nsphere = "S1"\nresolution = 32\n[time]\nt_final = 0.2\noutputs = 1\n'


def refused(tmp_path: Path, capsys, text: str, field: str, *extra: str, command: str = "run") -> None:
    """``meanfield COMMAND case.toml --out out --quiet EXTRA`` with ``text`` as case.toml: exit 2,
    one line on stderr naming ``field``, nothing on stdout, no ``out``."""
    cfg = tmp_path / "case.toml"
    cfg.write_text(text)
    out = tmp_path / "out"
    args = [command, str(cfg), "--out", str(out), "--quiet", *extra]
    assert main(args) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0], captured.err
    assert captured.out == "" and not out.exists()
