"""MkDocs hook: the reference tables that would drift from the code are generated from it at build time.

A page asks for one with a line of its own, `<!-- generated:NAME -->`:
- `api-table`: every API served, with the versions of its handler module (broker/handlers/);
- `api-profiles`: what ApiVersions advertises under each Kafka version profile (broker/config/versions.py);
- `broker-configs`, `topic-configs`: the configuration keys, defaults and descriptions
  (broker/config/config.py BROKER_CONFIGS, storage/config.py TOPIC_CONFIGS);
- `cli-help`: the `--help` of `minikafka` and of each sub-command, from their argument parsers.
An unknown name fails the build. bench/NOTES.md, the measurement log, is served as performance-notes.md.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generated:([a-z-]+) -->$", re.MULTILINE)
HELP_COLUMNS = "100"  # argparse wraps help to the terminal's width; a fixed one keeps the pages stable
ABSENT = "-"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _span(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _handler_modules() -> list[ModuleType]:
    from minikafka.broker.handlers import all_handler_modules

    return sorted(all_handler_modules(), key=lambda module: int(module.API_KEY))


def api_table() -> str:
    from minikafka.protocol.api_keys import kafka_api_name

    rows = []
    for module in _handler_modules():
        served = module.VERSIONS
        advertised = getattr(module, "ADVERTISED_VERSIONS", served)
        shown = _span(advertised.min, advertised.max)
        if advertised != served:
            shown += f" (served: {_span(served.min, served.max)})"
        path = module.__name__.removeprefix("minikafka.").replace(".", "/") + ".py"
        rows.append([kafka_api_name(int(module.API_KEY)), str(int(module.API_KEY)), shown, f"`{path}`"])
    return _table(["API", "key", "versions advertised", "handler"], rows)


def api_profiles() -> str:
    from minikafka.broker.config.versions import KAFKA_API_VERSIONS
    from minikafka.broker.wire.registry import Registry
    from minikafka.protocol.api_keys import kafka_api_name

    modules = _handler_modules()
    registries = {release: Registry.from_modules(modules, kafka_version=release) for release in KAFKA_API_VERSIONS}
    rows = []
    for module in modules:
        key = int(module.API_KEY)
        row = [kafka_api_name(key), str(key)]
        for registry in registries.values():
            route = registry.route(key)
            row.append(ABSENT if route is None else _span(route.advertised.min, route.advertised.max))
        rows.append(row)
    return _table(["API", "key", *registries], rows)


def _default(value: str | None) -> str:
    if value is None:
        return "unset"
    return f"`{value}`" if value else "empty"


def broker_configs() -> str:
    from minikafka.broker.config.config import BROKER_CONFIGS

    rows = [[f"`{d.name}`", d.type, _default(d.default), d.doc] for d in BROKER_CONFIGS.values()]
    return _table(["key", "type", "default", "description"], rows)


def topic_configs() -> str:
    from minikafka.storage.config import TOPIC_CONFIGS

    rows = []
    for d in TOPIC_CONFIGS.values():
        synonym = f"`{d.broker_synonym}`" if d.broker_synonym else ABSENT
        effect = d.doc if d.field else f"{d.doc} (accepted and described; minikafka does not act on it)"
        rows.append([f"`{d.name}`", synonym, d.type, _default(d.default), effect])
    return _table(["topic key", "broker key (default for every topic)", "type", "default", "description"], rows)


@contextlib.contextmanager
def _as_after_import() -> Iterator[None]:
    """broker/__main__.py tunes the process for a broker when imported (the collector off, hypothesis and
    rich kept out); undo both for this process, which goes on building the site."""
    collecting = gc.isenabled()
    before = set(sys.modules)
    try:
        yield
    finally:
        for name in set(sys.modules) - before:
            if sys.modules[name] is None:
                del sys.modules[name]
        if collecting:
            gc.enable()


def _help_of(main: Callable[[list[str]], object], argv: list[str]) -> str:
    out = io.StringIO()
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main(argv)
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return out.getvalue().rstrip()


def cli_help() -> str:
    with _as_after_import():
        cli = importlib.import_module("minikafka.broker.__main__")
    from minikafka.testing import certs

    commands: list[tuple[str, Callable[[list[str]], object], list[str]]] = [
        ("minikafka", cli.main, []), ("minikafka serve", cli.main, ["serve"]),
        *((f"minikafka {name}", cli.main, [name]) for name in cli._TOOLS),
        ("python -m minikafka.testing.certs", certs.main, []),
    ]
    sections = [f"### `{title} --help`\n\n```text\n{_help_of(main, [*argv, '--help'])}\n```"
                for title, main, argv in commands]
    return "\n\n".join(sections)


GENERATORS: dict[str, Callable[[], str]] = {
    "api-table": api_table,
    "api-profiles": api_profiles,
    "broker-configs": broker_configs,
    "topic-configs": topic_configs,
    "cli-help": cli_help,
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    notes = ROOT / "bench" / "NOTES.md"
    files.append(File.generated(config, "performance-notes.md", abs_src_path=str(notes)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    def generate(match: re.Match[str]) -> str:
        generator = GENERATORS.get(match.group(1))
        if generator is None:
            raise PluginError(f"{page.file.src_uri}: no generator named {match.group(1)!r} "
                              f"(known: {', '.join(GENERATORS)})")
        return generator()

    return MARKER.sub(generate, markdown)
