"""The public API is declared: every module's ``__all__`` is a tuple of names that exist and covers the classes
and functions the module defines under public names; docs/api.md lists exactly the exports of each public module."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import jsonrpc_mcp

ROOT = Path(__file__).resolve().parent.parent
API_DOC = ROOT / "docs" / "api.md"
_HEADING = re.compile(r"^### `([a-z_.]+)`")
_NAME_LIST = re.compile(r"^`[A-Za-z_][A-Za-z0-9_]*`(, `[A-Za-z_][A-Za-z0-9_]*`)*,?$")


def package_modules() -> list[str]:
    found = [info.name for info in pkgutil.walk_packages(jsonrpc_mcp.__path__, "jsonrpc_mcp.")]
    return ["jsonrpc_mcp", *(name for name in found if not any(part.startswith("_") for part in name.split(".")))]


def load(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # pragma: no cover - an extra not installed
        pytest.skip(f"{name} needs an extra: {exc}")


def declared() -> dict[str, list[str] | None]:
    """docs/api.md: module -> the names it lists (None for a module described without a list)."""
    modules: dict[str, list[str] | None] = {}
    current: str | None = None
    for line in API_DOC.read_text().splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = heading.group(1)
            modules[current] = None
        elif current is not None and _NAME_LIST.match(line.strip()):
            names = modules[current] or []
            names += re.findall(r"`([^`]+)`", line)
            modules[current] = names
    return modules


@pytest.mark.parametrize("name", package_modules())
def test_all_is_a_tuple_of_real_names_covering_what_the_module_defines(name: str) -> None:
    module = load(name)
    exported = getattr(module, "__all__", None)
    assert type(exported) is tuple, f"{name}.__all__ must be a tuple"
    assert len(set(exported)) == len(exported), f"{name}.__all__ names something twice"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
    defined = [
        n
        for n, value in vars(module).items()
        if not n.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == name
    ]
    left_out = [n for n in defined if n not in exported]
    assert not left_out, (
        f"{name} defines public names its __all__ leaves out (export them or rename them _x): {left_out}"
    )


def test_docs_api_lists_exactly_the_exports_of_each_public_module() -> None:
    modules = declared()
    assert "jsonrpc_mcp" in modules and "jsonrpc_mcp.transports.stdio" in modules
    for name, names in modules.items():
        if names is None:
            assert name == "jsonrpc_mcp.types", f"docs/api.md: {name} has no list of names"
            assert isinstance(jsonrpc_mcp.types, ModuleType) and jsonrpc_mcp.types.__all__
            continue
        module = load(name)
        exported = set(module.__all__)
        assert len(names) == len(set(names)), f"docs/api.md names something of {name} twice"
        assert set(names) == exported, (
            f"docs/api.md and {name}.__all__ differ: "
            f"only in the doc {sorted(set(names) - exported)}, only in __all__ {sorted(exported - set(names))}"
        )


def test_every_module_docs_api_names_is_a_module_of_the_package() -> None:
    known = set(package_modules())
    for name in declared():
        assert name == "jsonrpc_mcp.types" or name in known, name
