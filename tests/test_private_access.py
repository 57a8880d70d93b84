"""No module reads another module's private names: read from the source with ``ast``, nothing run.

A name with one leading underscore is private to the module that defines it.  The rule, per
module of the package (and of the benchmarks, which use the package as users do):

* an attribute ``x._name`` is read only where ``_name`` is defined in the same module (a function,
  method or class of that name, an assignment to it: ``self._name = ...``, a class attribute), so
  a class's own privates stay free to use on ``self``, ``cls`` or another instance of the class,
  and another module's are not (``sim._gather``, ``scheme._targets``);
* ``getattr``/``hasattr``/``setattr`` with a private name as a literal count as that attribute;
* ``from module import _name`` is refused (another module's private name).

Dunder names (``__name__``) are not private.  The named tuple's documented methods
(``_replace``, ``_asdict``, ...) are public despite their underscore.  What the rule cannot see:
an attribute defined in the reading module under the same name as another module's private
one passes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TREES = ("meanfield", "benchmarks")
#: Public API despite the underscore: :func:`collections.namedtuple`'s methods and attributes.
NAMED_TUPLE = {"_replace", "_asdict", "_fields", "_field_defaults", "_make"}
REFLECTION = {"getattr", "hasattr", "setattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMED_TUPLE


def _reflected(node: ast.Call) -> str | None:
    """The literal attribute name of a ``getattr``-like call, else ``None``."""
    if isinstance(node.func, ast.Name) and node.func.id in REFLECTION and len(node.args) > 1:
        name = node.args[1]
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            return name.value
    return None


def private_reads(source: str) -> list[tuple[int, str]]:
    """(line, text) of each read of another module's private name in ``source`` (one walk: the
    module's own names (its functions, classes, assigned names and attributes) are
    gathered beside the candidate reads, which are kept where the module does not define them)."""
    own: set[str] = set()
    reads: list[tuple[str, int, ast.AST]] = []
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif _private(node.attr):
                reads.append((node.attr, node.lineno, node))
        elif isinstance(node, ast.Call) and _private(_reflected(node) or ""):
            reads.append((_reflected(node) or "", node.lineno, node))
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found += [(node.lineno, f"from {module} import {a.name}") for a in node.names if _private(a.name)]
    found += [(line, ast.unparse(node)) for name, line, node in reads if name not in own]
    return sorted(found)


def test_the_rule_sees_what_it_forbids_and_allows_a_module_its_own() -> None:
    source = """
from .ordering import _gather_rows
class Run:
    def __init__(self, sim):
        self._sim = sim
    def _helper(self, other):
        return other._sim, self._helper
    def reach(self):
        return self._sim._gather(1), getattr(self._sim, "_targets"), options._replace(a=1), type(self).__name__
"""
    assert private_reads(source) == [(2, "from .ordering import _gather_rows"), (9, "getattr(self._sim, '_targets')"),
                                     (9, "self._sim._gather")]


@pytest.mark.parametrize("tree", TREES)
def test_no_module_reads_another_modules_private_names(tree: str) -> None:
    reads = [f"{path.relative_to(ROOT)}:{line}: {text}" for path in sorted((ROOT / tree).rglob("*.py"))
             for line, text in private_reads(path.read_text(encoding="utf-8"))]
    assert not reads, "private names of other modules read:\n" + "\n".join(reads)
