"""The runtime's structural rules, checked on its source.

* No import cycle between runtime modules (shared types live in leaf modules).
* ``runtime`` imports the other subpackages only through their ``__init__``.
* No module reads another module's private attributes: ``obj._name`` is allowed only for
  names the module itself defines (its own ``self._name`` attributes and functions).
"""

from __future__ import annotations

import ast
from pathlib import Path

import deputy_runtime.runtime

RUNTIME = Path(deputy_runtime.runtime.__file__).parent
SUBPACKAGES = {"chat", "tools", "definitions"}


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(RUNTIME.glob("*.py"))}


def _sibling_imports(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module)
            else:
                out.update(alias.name for alias in node.names)
    return out


def test_no_import_cycles_inside_runtime() -> None:
    graph = {name: _sibling_imports(tree) for name, tree in _modules().items()}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            raise AssertionError(f"import cycle: {' -> '.join((*path, name))}")
        if name in done:
            return
        for dep in sorted(graph.get(name, ())):
            visit(dep, (*path, name))
        done.add(name)

    for name in graph:
        visit(name, ())


def test_no_type_checking_imports_and_no_deep_imports() -> None:
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                assert node.id != "TYPE_CHECKING", f"{name}: TYPE_CHECKING import"
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:
                head, _, rest = node.module.partition(".")
                assert not (head in SUBPACKAGES and rest), (
                    f"{name}: imports ..{node.module}; import from ..{head} instead"
                )


def _own_private_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # __slots__ entries
    return names


def test_no_module_reads_another_modules_private_attributes() -> None:
    for name, tree in _modules().items():
        own = _own_private_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if not attr.startswith("_") or attr.startswith("__"):
                continue
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if isinstance(base, ast.Call) and ast.unparse(base.func) == "super":
                continue
            assert attr in own, f"{name}.py:{node.lineno}: {ast.unparse(node)}"
