"""Consumer groups with kafkajs (Node.js): split, consume, describe/list, leave, committed offsets, delete."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from minikafka.testing import Broker

from tests.support.names import unique_topic

JS_DIR = Path(__file__).parent / "js"
NODE = shutil.which("node")
pytestmark = [
    pytest.mark.kafkajs,
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        NODE is None or not (JS_DIR / "node_modules" / "kafkajs").exists(),
        reason="node or kafkajs is not installed (make js)",
    ),
]


def test_group_lifecycle(broker: Broker) -> None:
    topic, group = unique_topic("kjsg"), unique_topic("kjs-group")
    proc = subprocess.run(
        [NODE or "node", str(JS_DIR / "groups.js"), broker.bootstrap_servers, topic, group],
        capture_output=True, text=True, timeout=90, check=False,
    )
    result = json.loads(proc.stdout or "{}")
    assert proc.returncode == 0 and "error" not in result, (result, proc.stderr)
    first, second = result["split"]
    assert len(first) == len(second) == 2 and set(first) | set(second) == {0, 1, 2, 3}
    assert result["consumed"] == 8
    assert result["state"] == "Stable" and result["members"] == 2 and result["protocol"] == "RoundRobinAssigner"
    assert result["listed"] is True
    assert sorted(result["afterLeave"]) == [0, 1, 2, 3]
    assert result["committed"] == [[0, "2"], [1, "2"], [2, "2"], [3, "2"]]
    assert result["deleted"][0]["errorCode"] == 0
    assert result["listedAfterDelete"] is False
