"""docs/schema-registry.md's examples, run as written: the Python ones, and each curl command against a fresh
broker with its answer compared to the JSON the page shows after it (addresses replaced by the broker's)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from minikafka.testing import Broker

PAGE = Path(__file__).resolve().parents[2] / "docs" / "schema-registry.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _blocks() -> list[tuple[str, str]]:
    return [(match.group(1), match.group(2)) for match in _BLOCK.finditer(PAGE.read_text())]


def _addressed(text: str, broker: Broker) -> str:
    assert broker.schema_registry_url is not None
    return text.replace("http://localhost:8081", broker.schema_registry_url).replace(
        "localhost:9092", broker.bootstrap_servers)


def test_the_python_examples_run() -> None:
    examples = [text for language, text in _blocks() if language == "python"]
    assert len(examples) == 2
    with Broker(schema_registry=True) as broker:
        for example in examples:
            exec(compile(_addressed(example, broker), str(PAGE), "exec"), {})  # the page's own code


def test_the_shell_examples_answer_what_the_page_shows() -> None:
    blocks = _blocks()
    checked = 0
    with Broker(schema_registry=True) as broker:
        for index, (language, text) in enumerate(blocks):
            if language != "bash":
                continue
            command = _addressed(text, broker)
            if command.startswith("kcat") and shutil.which("kcat") is None:
                pytest.skip("kcat is not installed")
            done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30, check=True)
            if index + 1 < len(blocks) and blocks[index + 1][0] == "json":
                assert json.loads(done.stdout) == json.loads(blocks[index + 1][1]), command
                checked += 1
            else:
                # kcat reading `_schemas`: one key and value per line, Confluent's SCHEMA keys among them.
                assert command.startswith("kcat")
                assert '{"keytype":"SCHEMA","subject":"users-value","version":1,"magic":1}' in done.stdout
    assert checked == 12
