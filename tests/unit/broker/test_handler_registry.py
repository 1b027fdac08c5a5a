"""The handler registry is the handlers folder: one module per Kafka API, each registered, none importing another.

broker/handlers/ holds one module per API (every .py but __init__.py) and `_shared/`, the code several of
them use. A module added to the folder but not to HANDLER_INDEX would never be served; an API module
importing another would tie two APIs together where `_shared/` is the place for what they share.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import ModuleType

import pytest
from minikafka.broker import handlers
from minikafka.broker.handlers import HANDLER_INDEX, HANDLER_MODULES, all_handler_modules
from minikafka.broker.wire.registry import Registry, StaleHandlerIndex, index_row
from minikafka.protocol.api_keys import ApiKey, VersionRange

PACKAGE = handlers.__name__
FOLDER = Path(handlers.__file__).parent
SHARED = "_shared"
API_MODULE_NAMES = sorted(path.stem for path in FOLDER.glob("*.py") if path.name != "__init__.py")
MODULES = {module.__name__.rpartition(".")[2]: module for module in all_handler_modules()}


def _named(versions: VersionRange) -> str:
    """How a docstring names a range: "v0-4", or "v0" for one version."""
    return f"v{versions.min}" if versions.min == versions.max else f"v{versions.min}-{versions.max}"


def _names_range(text: str, versions: VersionRange) -> bool:
    # "v1" must not be found inside "v1-2", nor "v1-1" inside "v1-13".
    return re.search(rf"(?<![\w-]){re.escape(_named(versions))}(?![\w-])", text) is not None


def test_the_shared_folder_is_a_package_not_an_api() -> None:
    assert (FOLDER / SHARED / "__init__.py").is_file()
    assert SHARED not in API_MODULE_NAMES


def test_handler_modules_are_the_api_modules_of_the_folder() -> None:
    assert len(HANDLER_MODULES) == len(set(HANDLER_MODULES)), "a module is listed twice"
    assert sorted(HANDLER_MODULES) == API_MODULE_NAMES
    assert sorted(MODULES) == API_MODULE_NAMES


def test_the_registry_routes_every_api_module_once() -> None:
    registry = Registry.from_modules(all_handler_modules())
    routed = {route.name for key in ApiKey if (route := registry.route(key)) is not None}
    assert routed == {f"{PACKAGE}.{name}" for name in API_MODULE_NAMES}
    assert len({int(module.API_KEY) for module in MODULES.values()}) == len(MODULES)


def test_the_handler_index_repeats_what_each_module_declares() -> None:
    """The index a start reads instead of importing the modules; paste the printed rows when it fails."""
    rows = tuple(index_row(module) for module in all_handler_modules())
    pasted = "\n".join(f"    {row!r}," for row in rows).replace("'", '"')
    assert rows == HANDLER_INDEX, f"rewrite HANDLER_INDEX in broker/handlers/__init__.py with:\n{pasted}"


def test_a_registry_built_from_the_index_imports_a_module_at_its_first_route() -> None:
    registry = Registry(HANDLER_INDEX)
    from_modules = Registry.from_modules(all_handler_modules())
    assert registry.api_versions() == from_modules.api_versions()
    assert ApiKey.METADATA not in registry._routes  # nothing resolved until asked
    route = registry.route(ApiKey.METADATA)
    assert route is not None and route.name == f"{PACKAGE}.metadata"
    assert registry.route(ApiKey.METADATA) is route
    assert registry.route(9999) is None


def test_a_module_that_differs_from_its_index_row_is_refused() -> None:
    name, key, low, high, advertised_low, advertised_high = HANDLER_INDEX[0]
    registry = Registry([(name, key, low, high - 1, advertised_low, advertised_high - 1)])
    with pytest.raises(StaleHandlerIndex):
        registry.route(key)
    with pytest.raises(StaleHandlerIndex):  # every request, not the first only
        registry.route(key)


@pytest.mark.parametrize("name", API_MODULE_NAMES)
def test_an_api_module_declares_its_api(name: str) -> None:
    module: ModuleType = MODULES[name]
    assert isinstance(module.API_KEY, ApiKey)
    assert isinstance(module.VERSIONS, VersionRange)
    assert callable(module.handle)


@pytest.mark.parametrize("name", API_MODULE_NAMES)
def test_an_api_module_docstring_names_its_versions(name: str) -> None:
    module = MODULES[name]
    assert module.__doc__, f"{name} has no module docstring"
    summary = module.__doc__.splitlines()[0]
    assert _names_range(summary, module.VERSIONS), f"{name}: {summary!r} does not name {_named(module.VERSIONS)}"
    advertised = getattr(module, "ADVERTISED_VERSIONS", None)
    if advertised is not None:
        assert _names_range(summary, advertised), f"{name}: {summary!r} does not name {_named(advertised)}"


def _imported_modules(tree: ast.Module, module_name: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the tree, relative ones resolved; `from P import x`
    yields P.x too, since x may be a module."""
    package = module_name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.append((node.lineno, source))
            found += [(node.lineno, f"{source}.{alias.name}") for alias in node.names]
    return found


def _api_module_imported(imported: str) -> str | None:
    """The API module `imported` is or lies in, if any (the package itself and `_shared` are not)."""
    if not imported.startswith(f"{PACKAGE}."):
        return None
    first = imported[len(PACKAGE) + 1:].split(".")[0]
    return first if first in API_MODULE_NAMES else None


@pytest.mark.parametrize("name", API_MODULE_NAMES)
def test_an_api_module_imports_no_other_api_module(name: str) -> None:
    path = FOLDER / f"{name}.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    crossings = [f"line {line}: {imported}" for line, imported in _imported_modules(tree, f"{PACKAGE}.{name}")
                 if _api_module_imported(imported) not in (None, name)]
    assert crossings == []


def test_the_import_check_sees_relative_and_absolute_imports() -> None:
    """The parser above on imports written every way an API module could reach another."""
    source = "\n".join([
        "from . import fetch",
        "from .produce import handle",
        "from .. import handlers",
        "import minikafka.broker.handlers.metadata",
        "from minikafka.broker.handlers import heartbeat",
        "from minikafka.broker.handlers._shared.common import response_of",
        "from ._shared import group",
        "def later():",
        "    from minikafka.broker.handlers.join_group import handle",
    ])
    imported = _imported_modules(ast.parse(source), f"{PACKAGE}.sync_group")
    assert sorted({api for _line, name in imported if (api := _api_module_imported(name))}) == [
        "fetch", "heartbeat", "join_group", "metadata", "produce"]
