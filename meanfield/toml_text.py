"""A config as compact TOML text: one ``[section]`` per section, every array on one line, tables
inside a section as inline tables, and lists of tables (``[[model.layers]]``, ``[[model.heads]]``)
as arrays of tables whose values are written the same way.

Written with tomlkit; :func:`config_toml` checks that the text reads back (``tomllib``) to the
same mapping before returning it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any


def _is_table_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _item(value: Any) -> Any:
    """A tomlkit item for a value inside a table: inline tables and one-line arrays."""
    import tomlkit

    if isinstance(value, Mapping):
        table = tomlkit.inline_table()
        for key, v in value.items():
            table.append(key, _item(v))
        return table
    if isinstance(value, list):
        array = tomlkit.array()
        array.extend(_item(v) for v in value)
        return array
    return tomlkit.item(value)


def _table(values: Mapping[str, Any]) -> Any:
    """A ``[section]`` table: plain keys first, then lists of tables as ``[[section.key]]``."""
    import tomlkit

    table = tomlkit.table()
    for key, value in values.items():
        if not _is_table_list(value):
            table.append(key, _item(value))
    for key, value in values.items():
        if _is_table_list(value):
            tables = tomlkit.aot()
            for entry in value:
                tables.append(_table(entry))
            table.append(key, tables)
    return table


def config_toml(data: Mapping[str, Any], head: str = "") -> str:
    """``data`` (top-level keys, then one mapping per section) as compact TOML (module docstring).

    Parameters
    ----------
    data
        The mapping to write; ``None`` values must have been dropped (TOML has no null).
    head
        Comment lines put first, as they are.

    Raises
    ------
    ValueError
        The text would not read back to ``data`` (a value TOML cannot hold as it is).
    """
    import tomlkit

    document = tomlkit.document()
    for key, value in data.items():
        if not isinstance(value, Mapping):
            document.append(key, _item(value))
    for key, value in data.items():
        if isinstance(value, Mapping):
            document.append(key, _table(value))
    text = head + tomlkit.dumps(document)
    if tomllib.loads(text) != data:
        raise ValueError("config: the TOML written does not read back to the same config")
    return text
