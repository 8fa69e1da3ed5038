"""The package's import structure, checked statically with ``ast``.

Two rules keep the package layered:

* **No import circles.** A module's import-time imports (module level and class bodies,
  ``from . import x`` included; imports under ``if TYPE_CHECKING:`` and inside functions are
  not executed at import time and do not count) never lead back to it. Importing
  ``a.b.c`` also imports the packages ``a`` and ``a.b``, so those ``__init__`` modules are
  edges too, except packages that already contain the importer (Python has started them
  before the importer runs).
* **No private cross-module access.** A leading-underscore name is private to where it is
  defined: a private module (``_x``) is visible inside the package that contains it
  (subpackages included), so ``deputy_runtime.chat._chat`` may import
  ``deputy_runtime._ids`` but ``deputy_runtime.skills`` may not import
  ``deputy_runtime.definitions._model``; a private name (``_helper``) is never imported
  from another module; and ``obj._attr`` is read only on ``self``/``cls`` or when this
  module itself defines an attribute of that name (its own classes' private state).
  Dunder names are public.

Each violation is printed with ``file:line``. Violations inside ``deputy_runtime/runtime/``
are checked by a separate test so the rest of the package is held to the rules strictly.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "deputy_runtime"
ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / PACKAGE
RUNTIME_DIR = PACKAGE_DIR / "runtime"

# Underscore attributes of other libraries that are their documented public API.
PUBLIC_FOREIGN_ATTRIBUTES = frozenset({"_exit", "_getframe", "_replace", "_asdict", "_fields"})


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool
    tree: ast.Module

    @property
    def package(self) -> str:
        """The package this module's relative imports resolve against."""
        return self.name if self.is_package else self.name.rpartition(".")[0]


@dataclass(frozen=True)
class Import:
    target: str  # the imported module
    names: tuple[str, ...]  # names taken from it with ``from target import ...``
    line: int


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _modules() -> dict[str, Module]:
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        modules[name] = Module(name, path, is_package, tree)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements run when the module is imported: not function bodies, not TYPE_CHECKING."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _import_time_statements(node.body)
            yield from _import_time_statements(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _import_time_statements(block)
            for handler in node.handlers:
                yield from _import_time_statements(handler.body)
        elif isinstance(node, ast.With | ast.For | ast.While | ast.ClassDef):
            yield from _import_time_statements(node.body)


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.package.split(".")
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _imports(module: Module, statements: Iterator[ast.stmt]) -> Iterator[Import]:
    for node in statements:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, (), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            names = tuple(alias.name for alias in node.names)
            yield Import(_resolve(module, node), names, node.lineno)


def _all_imports(module: Module) -> Iterator[Import]:
    """Every import statement, wherever it is (functions and TYPE_CHECKING included)."""
    statements = (node for node in ast.walk(module.tree) if isinstance(node, ast.stmt))
    return _imports(module, statements)


def _edges(module: Module, modules: dict[str, Module]) -> Iterator[tuple[str, int]]:
    """The package modules that importing ``module`` imports directly, with the line."""
    own_packages = {".".join(module.name.split(".")[:i]) for i in range(1, 10)}
    for imported in _imports(module, _import_time_statements(module.tree.body)):
        targets = [imported.target]
        targets += [f"{imported.target}.{name}" for name in imported.names]
        for target in targets:
            if target not in modules:
                continue
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                step = ".".join(parts[:i])
                if step in modules and step not in own_packages and step != module.name:
                    yield step, imported.line


def _circles(modules: dict[str, Module]) -> list[list[str]]:
    """Strongly connected components of the import graph with more than one module."""
    graph = {name: sorted({t for t, _ in _edges(m, modules)}) for name, m in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the graph is small
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in graph:
        if name not in index:
            visit(name)
    return found


def circle_violations(modules: dict[str, Module]) -> list[tuple[Path, str]]:
    """One entry per import edge inside a circle, at the importing file:line."""
    violations = []
    for component in _circles(modules):
        members = set(component)
        for name in component:
            module = modules[name]
            for target, line in sorted(set(_edges(module, modules))):
                if target in members:
                    violations.append(
                        (
                            module.path,
                            f"{_where(module.path, line)}: {name} -> {target} "
                            f"(import circle: {', '.join(component)})",
                        )
                    )
    return violations


def _own_names(module: Module) -> set[str]:
    """Names this module defines: functions, classes, assignments, attributes on self/cls."""
    names: set[str] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.isidentifier()
        ):  # __slots__ entries and field names spelled as strings
            names.add(node.value)
    return names


def _where(path: Path, line: int) -> str:
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return f"{shown}:{line}"


def private_violations(modules: dict[str, Module]) -> list[tuple[Path, str]]:
    violations = []
    for module in modules.values():
        for imported in _all_imports(module):
            if not imported.target.startswith(PACKAGE):
                continue
            targets = [imported.target]
            for name in imported.names:
                submodule = f"{imported.target}.{name}"
                if submodule in modules:
                    targets.append(submodule)
                elif _is_private(name) and imported.target != module.name:
                    violations.append(
                        (
                            module.path,
                            f"{_where(module.path, imported.line)}: imports private name "
                            f"{name!r} from {imported.target}",
                        )
                    )
            for target in targets:
                parts = target.split(".")
                for i, part in enumerate(parts):
                    owner = ".".join(parts[:i])
                    visible = module.package == owner or module.package.startswith(owner + ".")
                    if _is_private(part) and not visible:
                        violations.append(
                            (
                                module.path,
                                f"{_where(module.path, imported.line)}: imports "
                                f"{target}, private to {owner}",
                            )
                        )
                        break
        own = _own_names(module)
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}:
                continue
            if node.attr in own or node.attr in PUBLIC_FOREIGN_ATTRIBUTES:
                continue
            violations.append(
                (
                    module.path,
                    f"{_where(module.path, node.lineno)}: reads {ast.unparse(node)}, "
                    "a private attribute this module does not define",
                )
            )
    return violations


def _in_runtime(path: Path) -> bool:
    return path.is_relative_to(RUNTIME_DIR)


def _report(violations: list[tuple[Path, str]]) -> str:
    lines = sorted({text for _, text in violations})
    return f"{len(lines)} violation(s):\n" + "\n".join(lines)


MODULES = _modules()


def test_the_checker_sees_the_whole_package() -> None:
    assert f"{PACKAGE}.chat" in MODULES
    assert f"{PACKAGE}.runtime._agent" in MODULES
    assert len(MODULES) > 50


def test_no_import_circles_outside_the_runtime() -> None:
    violations = [v for v in circle_violations(MODULES) if not _in_runtime(v[0])]
    assert not violations, _report(violations)


def test_no_private_access_outside_the_runtime() -> None:
    violations = [v for v in private_violations(MODULES) if not _in_runtime(v[0])]
    assert not violations, _report(violations)


def test_no_import_circles_or_private_access_in_the_runtime() -> None:
    violations = [
        v for v in circle_violations(MODULES) + private_violations(MODULES) if _in_runtime(v[0])
    ]
    assert not violations, _report(violations)


def test_the_checker_catches_each_kind_of_violation(tmp_path: Path) -> None:
    """The rules themselves, on a small made-up package."""
    source = {
        "__init__.py": "from .a import A\n",
        "a.py": "from . import b\nA = 1\n",
        "b.py": "from .a import A\nfrom .sub._hidden import thing\nfrom .c import _secret\n",
        "c.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from .a import A\n"
            "_secret = 1\n"
            "class C:\n    def __init__(self):\n        self._own = 1\n"
            "    def same(self, other):\n        return other._own\n"
            "def peek(obj):\n    return obj._theirs\n"
        ),
        "sub/__init__.py": "",
        "sub/_hidden.py": "from .. import c\nthing = c\n",
    }
    for relative, text in source.items():
        path = tmp_path / PACKAGE / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    fake = {}
    for path in sorted((tmp_path / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(tmp_path).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        fake[name] = Module(name, path, is_package, ast.parse(path.read_text()))

    assert _circles(fake) == [[f"{PACKAGE}.a", f"{PACKAGE}.b"]]  # c's TYPE_CHECKING: no edge
    texts = [text.split(": ", 1)[1] for _, text in private_violations(fake)]
    assert sorted(texts) == sorted(
        [
            f"imports private name '_secret' from {PACKAGE}.c",
            f"imports {PACKAGE}.sub._hidden, private to {PACKAGE}.sub",
            "reads obj._theirs, a private attribute this module does not define",
        ]
    )
