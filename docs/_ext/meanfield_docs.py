"""Sphinx directives that write reference tables from the code, so the pages cannot drift.

``.. config-reference::``
    One table per config section from :data:`meanfield.config.SCHEMA`, under the label
    ``config-<section>`` (``config-top`` for the top level) that other pages link to with
    ``:ref:``: key, default and the accepted values come from the schema; the meaning of each
    key comes from the directive's content, one ``section.key: meaning`` entry per key
    (continuation lines indented).  A key of the schema without a meaning, or a meaning of a
    key the schema lacks, is a warning (an error under ``-W``): adding a config key without
    documenting it fails ``make docs``.
    Entries ``initial.<kind>.<parameter>``, ``model.ffn.<key>``, ``model.heads.<key>`` and
    ``model.layers.<key>``, ``model.random.<key>`` are checked the same way against
    ``meanfield.initial.PARAMETERS``, ``meanfield.layers.FFN_KEYS`` / ``LAYER_KEYS``,
    ``meanfield.random_weights.RANDOM_KEYS`` and the head keys.

``.. default-config::``
    :data:`meanfield.config.DEFAULT_CONFIG` (the run of ``meanfield run`` without a file) as TOML.

``.. import-floors::``
    The floors of the package, from the directive's content (``floor name: module, module, ...``,
    the bottom floor first; modules are the top-level modules and subpackages of ``meanfield``),
    and, read from the source at build time, what each module imports from the others.  An
    import from a higher floor is flagged on the page; a module the content does not place on
    a floor, or a placed module that does not exist, is a warning.

``.. examples-index::``
    One section per config in ``runs/examples/``: its header comment (purpose and commands),
    its main settings read from the file, the command that runs it, and its picture
    ``docs/_static/examples/<name>.png`` (a warning when one is missing).

``.. run-files::``
    The files of a run directory, from their declarations
    (:data:`meanfield.rundir.layout.RUN_FILE_SPECS`): name, what it holds, the runs that write it
    and what reads it back; the directive's content adds entries (``name: text``) for what is not
    a run's file (the lock, the plots folder).

``.. cli-reference::``
    The ``--help`` text of ``meanfield`` and of every subcommand, from ``meanfield.cli.build_parser``.

:func:`demo_order` puts the demos of the gallery (``demos/``, sphinx-gallery) in reading order.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import os
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

#: The demos in reading order (others follow by name).
DEMOS = ("demo_run.py", "demo_validation.py", "demo_clusters.py")


def demo_order(filename: str) -> tuple[int, str]:
    """Sort key of a demo's file name (sphinx-gallery's ``within_subsection_order``)."""
    return (DEMOS.index(filename) if filename in DEMOS else len(DEMOS), filename)


#: Keys of a ``[[model.heads]]`` table (meanfield.model.AttentionModel.from_spec checks them).
HEAD_KEYS = ("Q", "K", "V", "weight")


def _literal(value: Any) -> str:
    """A default as TOML would spell it; ``None`` (unset: the meaning says what applies) as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "``true``" if value else "``false``"
    if isinstance(value, str):
        return f'``"{value}"``'
    if isinstance(value, list):
        return f"``{value!r}``".replace("'", '"')
    return f"``{value!r}``"


def _plain(text: str) -> str:
    """Schema text as literal RST text (it may hold ``*`` or backslashes)."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`")


def _entries(lines: StringList) -> dict[str, str]:
    """``key: meaning`` entries; an indented line continues the previous entry."""
    out: dict[str, str] = {}
    key = None
    for line in lines:
        if not line.strip():
            continue
        if line[0].isspace() and key is not None:
            out[key] += " " + line.strip()
            continue
        key, _, text = line.partition(":")
        key = key.strip()
        out[key] = text.strip()
    return out


def _table(header: list[str], rows: list[list[str]], widths: list[int]) -> list[str]:
    out = [".. list-table::", "   :header-rows: 1", "   :widths: " + " ".join(map(str, widths)), ""]
    for row in [header, *rows]:
        out.append(f"   * - {row[0]}")
        out += [f"     - {cell}" for cell in row[1:]]
    return out


class ConfigReference(SphinxDirective):
    """The config tables from ``SCHEMA``, with the meanings given in the directive's content."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        from meanfield.config import SCHEMA
        from meanfield.initial import PARAMETERS
        from meanfield.layers import FFN_KEYS, LAYER_KEYS
        from meanfield.random_weights import RANDOM_KEYS

        meanings = _entries(self.content)
        used: set[str] = set()

        def meaning(key: str) -> str:
            if key not in meanings:
                logger.warning(f"config-reference: no meaning given for config key {key!r}",
                               location=self.get_location())
                return "(undocumented)"
            used.add(key)
            return meanings[key]

        text: list[str] = []
        for section, keys in SCHEMA.items():
            title = "Top level" if not section else f"``[{section}]``"
            text += [f".. _config-{section or 'top'}:", "", title, "~" * len(title), ""]
            rows = []
            for key, (default, _check, what) in keys.items():
                full = f"{section}.{key}" if section else key
                rows.append([f"``{full}``", _literal(default), _plain(what), meaning(full)])
            text += _table(["key", "default", "type and accepted values", "meaning"], rows, [18, 12, 30, 40]) + [""]
            if section == "initial":
                rows = [[f"``{kind}``", ", ".join(f"``{p}``" for p in params) or "—",
                         meaning(f"initial.{kind}")] for kind, params in PARAMETERS.items()]
                text += ["Initial-density kinds and their parameters:", ""]
                text += _table(["kind", "parameters", "meaning"], rows, [12, 28, 60]) + [""]
                rows = [[f"``initial.{p}``", meaning(f"initial.{kind}.{p}")]
                        for kind, params in PARAMETERS.items() for p in params]
                text += _table(["parameter", "meaning"], rows, [25, 75]) + [""]
            if section == "model":
                for sub, subkeys in (("heads", HEAD_KEYS), ("ffn", FFN_KEYS), ("layers", LAYER_KEYS),
                                     ("random", RANDOM_KEYS)):
                    rows = [[f"``{k}``", meaning(f"model.{sub}.{k}")] for k in subkeys]
                    table = f"``[model.{sub}]``" if sub in ("ffn", "random") else f"``[[model.{sub}]]``"
                    text += [f"Keys of a {table} table:", ""]
                    text += _table(["key", "meaning"], rows, [15, 85]) + [""]
        for key in sorted(set(meanings) - used):
            logger.warning(f"config-reference: {key!r} is not a config key of meanfield.config.SCHEMA "
                           "(nor an initial parameter, head, ffn, layer or random key)", location=self.get_location())
        return self.parse_text_to_nodes("\n".join(text), allow_section_headings=True)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)  # numbers, strings and (nested) lists of them read the same in TOML


def _inline_toml(data: dict[str, Any]) -> str:
    """A config as TOML with one line per key (inline arrays), top-level keys first."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section, table in data.items():
        if isinstance(table, dict):
            lines += ["", f"[{section}]"] + [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


class DefaultConfig(SphinxDirective):
    """``DEFAULT_CONFIG`` as a TOML code block."""

    def run(self) -> list[nodes.Node]:
        import tomllib

        from meanfield.config import DEFAULT_CONFIG

        toml = _inline_toml(DEFAULT_CONFIG)
        if tomllib.loads(toml) != DEFAULT_CONFIG:
            logger.warning("default-config: the TOML written does not read back as DEFAULT_CONFIG",
                           location=self.get_location())
        block = nodes.literal_block(toml, toml, language="toml")
        return [block]


class CliReference(SphinxDirective):
    """``meanfield --help`` and ``meanfield <command> --help`` as literal blocks under headings."""

    def run(self) -> list[nodes.Node]:
        from meanfield.cli import build_parser

        os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal width: fix it
        parser = build_parser()
        text: list[str] = []
        for name, command in [("meanfield", parser), *((f"meanfield {k}", v) for k, v in parser.commands.items())]:
            buffer = io.StringIO()
            with redirect_stdout(buffer):
                command.print_help()
            title = f"``{name}``"
            text += [title, "~" * len(title), "", ".. code-block:: text", ""]
            text += ["   " + line for line in buffer.getvalue().rstrip().splitlines()] + [""]
        return self.parse_text_to_nodes("\n".join(text), allow_section_headings=True)


def _header(path: Path) -> str:
    """The comment lines at the top of a config file, without the ``#``."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[2:] if line.startswith("# ") else line[1:])
    return "\n".join(lines)


def _settings(data: dict) -> str:
    """The settings a reader wants first: sphere, mesh, scheme, model, end time, atoms."""
    mesh, model, time = data.get("mesh", {}), data.get("model", {}), data.get("time", {})
    sphere = mesh.get("sphere", "S2")
    resolution = mesh.get("resolution")
    if resolution is not None:
        sphere += f", {resolution} cells" if sphere == "S1" else f", icosphere level {resolution}"
    parts = [sphere, f"scheme {data.get('scheme', {}).get('kind', 'fv')}"]
    if model.get("velocity") == "rotation":
        parts.append("prescribed rotation")
    else:
        parts.append(f"attention {model.get('attention', 'softmax')}")
        if "beta" in model:
            parts.append(f"beta = {model['beta']:g}")
        if model.get("layers"):
            parts.append(f"{len(model['layers'])} layers")
        if model.get("ffn") or any("ffn" in layer for layer in model.get("layers") or []):
            parts.append("feed-forward block")
    if "t_final" in time:
        parts.append(f"t_final = {time['t_final']:g}")
    if data.get("atoms", {}).get("capture"):
        parts.append("atoms")
    return "; ".join(parts)


class ExamplesIndex(SphinxDirective):
    """Every example config: purpose and commands (its header), settings, picture."""

    def run(self) -> list[nodes.Node]:
        import tomllib

        root = Path(self.env.srcdir).parent
        pictures = Path(self.env.srcdir) / "_static" / "examples"
        spec = importlib.util.spec_from_file_location("make_example_pictures",
                                                      Path(self.env.srcdir) / "make_example_pictures.py")
        assert spec is not None and spec.loader is not None
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        recipes: dict[str, tuple[list[str], str]] = script.PICTURES
        text: list[str] = []
        for path in sorted((root / "runs" / "examples").glob("*.toml")):
            name = path.stem
            self.env.note_dependency(str(path))
            text += [f"``{name}``", "-" * (len(name) + 4), ""]
            text += [f"**Settings**: {_settings(tomllib.loads(path.read_text()))}.", ""]
            text += [".. code-block:: text", ""] + ["   " + line for line in _header(path).splitlines()] + [""]
            study = script.STUDIES.get(name)
            command = " ".join(study[0]) if study else f"run runs/examples/{name}.toml"
            text += [".. code-block:: sh", "", f"   .venv/bin/meanfield {command}", ""]
            if (pictures / f"{name}.png").is_file():
                overrides, picture = recipes.get(name) or ([], "?")
                short = "with " + " ".join(f"``--set {o}``" for o in overrides) if overrides else "as configured"
                caption = f"``{study[1]}`` of ``meanfield {study[0][0]}``, from the command above" if study else \
                    f"``{picture}`` of ``meanfield plot``, from a run {short}"
                text += [f".. figure:: _static/examples/{name}.png", f"   :alt: {name}", "", f"   {caption}.", ""]
            else:
                logger.warning(f"examples-index: no picture docs/_static/examples/{name}.png "
                               "(python docs/make_example_pictures.py draws them)", location=self.get_location())
        return self.parse_text_to_nodes("\n".join(text), allow_section_headings=True)


def _package_imports(root: Path) -> dict[str, dict[str, list[str]]]:
    """``{module: {imported module: ["file:line", ...]}}`` between the top-level modules of the package."""
    out: dict[str, dict[str, list[str]]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        package = parts if path.name == "__init__.py" else parts[:-1]
        source = parts[1] if len(parts) > 1 else "meanfield"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[list[str]] = []
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                module = base + (node.module.split(".") if node.module else [])
                targets = [module + [a.name] if not node.module else module for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".") for a in node.names]
            for target in targets:
                if target[:1] != ["meanfield"]:
                    continue
                name = target[1] if len(target) > 1 else "meanfield"
                if name not in (source, "version", "__version__"):
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    out.setdefault(source, {}).setdefault(name, []).append(where)
    return out


class ImportFloors(SphinxDirective):
    """The floors (from the content) and every module's imports (from the source)."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        import meanfield

        root = Path(meanfield.__file__).parent
        floors = {name.strip(): [m.strip() for m in mods.split(",") if m.strip()]
                  for name, mods in (line.split(":", 1) for line in self.content if line.strip())}
        level = {m: i for i, mods in enumerate(floors.values()) for m in mods}
        present = {p.stem if p.is_file() else p.name for p in root.iterdir()
                   if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
        present = (present - {"version"}) | {"meanfield"}
        for m in sorted(present - set(level)):
            logger.warning(f"import-floors: module meanfield.{m} is on no floor", location=self.get_location())
        for m in sorted(set(level) - present):
            logger.warning(f"import-floors: {m!r} is not a module of meanfield", location=self.get_location())
        imports = _package_imports(root)
        rows, upward = [], []
        for i, (name, mods) in enumerate(floors.items()):
            for m in mods:
                deps = imports.get(m, {})
                cells = []
                for dep in sorted(deps):
                    if level.get(dep, -1) > i:
                        cells.append(f"**{dep} (up)**")
                        upward += [f"``{where}``: ``{m}`` imports ``{dep}``" for where in deps[dep]]
                    else:
                        cells.append(dep)
                rows.append([f"{i + 1}. {name}" if m == mods[0] else "", f"``{m}``", ", ".join(cells) or "—"])
        text = _table(["floor", "module", "imports from (other modules of meanfield)"], rows, [25, 20, 55])
        text += ["", "Imports from a higher floor, as the code stands:", ""]
        text += [f"* {u}" for u in upward] or ["* none"]
        return self.parse_text_to_nodes("\n".join(text))


class RunFiles(SphinxDirective):
    """The run directory's files from their declarations, then the content's entries."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        from meanfield.rundir.layout import RUN_FILE_SPECS

        rows = [[f"``{spec.shown}``", spec.holds, ", ".join(spec.runs) or "former format",
                 f"``{spec.reader}``" if spec.reader else "people, ParaView"]
                for spec in RUN_FILE_SPECS]
        rows += [[f"``{name.strip()}``", text.strip(), "", ""]
                 for name, text in (line.split(":", 1) for line in self.content if line.strip())]
        return self.parse_text_to_nodes("\n".join(_table(["file", "what it holds", "runs", "read back by"], rows,
                                                           [18, 52, 10, 20])))


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("config-reference", ConfigReference)
    app.add_directive("default-config", DefaultConfig)
    app.add_directive("cli-reference", CliReference)
    app.add_directive("import-floors", ImportFloors)
    app.add_directive("examples-index", ExamplesIndex)
    app.add_directive("run-files", RunFiles)
    return {"version": "1", "parallel_read_safe": True}
