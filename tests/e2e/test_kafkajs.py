"""kafkajs (Node.js) against minikafka: admin API and producing; what it wrote is read with librdkafka.

kafkajs has no consumer without a group, so its consume tests live with the group coordinator's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic
from tests.support.names import unique_topic

JS_DIR = Path(__file__).parent / "js"
NODE = shutil.which("node")
pytestmark = [
    pytest.mark.kafkajs,
    pytest.mark.skipif(NODE is None or not (JS_DIR / "node_modules" / "kafkajs").exists(),
                       reason="node or kafkajs is not installed (make js)"),
]


def run_js(script: str, *args: str) -> dict:
    result = subprocess.run([NODE or "node", str(JS_DIR / script), *args], capture_output=True, text=True,
                            timeout=60, check=False)
    output = json.loads(result.stdout or "{}")
    assert result.returncode == 0 and "error" not in output, (output, result.stderr)
    return output


def test_admin_and_produce(broker: Broker) -> None:
    topic = unique_topic("kjs")
    result = run_js("admin_produce.js", broker.bootstrap_servers, topic)
    assert result["created"] is True and result["createdAgain"] is False
    assert result["listed"] is True
    assert result["partitions"] == 3
    assert result["retentionMs"] == "604800000"
    assert result["baseOffset"] == "0"
    offsets = {o["partition"]: o for o in result["offsets"]}
    assert (offsets[0]["low"], offsets[0]["high"]) == ("0", "3")
    assert offsets[1]["high"] == "2"
    by_time = {o["partition"]: o["offset"] for o in result["byTimestamp"]}
    assert by_time[0] == "1"
    after = {o["partition"]: o for o in result["offsetsAfterDelete"]}
    assert after[0]["low"] == "1"

    got = consume(broker.bootstrap_servers, topic, 2, offset=1)
    assert [(r.offset, r.key, r.value) for r in got] == [(1, None, b"v2"), (2, b"k3", None)]
    gz = consume(broker.bootstrap_servers, topic, 2, partitions=(1,))
    assert [r.value for r in gz] == [b"gz-1", b"gz-2"]


def test_delete_topic(broker: Broker) -> None:
    topic = unique_topic("kjsdel")
    create_topic(broker.bootstrap_servers, topic)
    assert run_js("delete_topic.js", broker.bootstrap_servers, topic) == {"gone": True}


def test_idempotent_producer(broker: Broker) -> None:
    topic = unique_topic("kjsidem")
    create_topic(broker.bootstrap_servers, topic)
    assert run_js("idempotent.js", broker.bootstrap_servers, topic, "3000") == {"sent": 3000}
    assert [int(r.value) for r in consume(broker.bootstrap_servers, topic, 3000)] == list(range(3000))  # type: ignore[arg-type]


def test_admin_edges_and_acks(broker_factory) -> None:
    broker = broker_factory(**{"auto.create.topics.enable": "false"})
    topic = unique_topic("kjsedge")
    result = run_js("admin_edges.js", broker.bootstrap_servers, topic)
    assert result["cluster"]["brokers"] == [{"nodeId": 1, "host": "127.0.0.1", "port": broker.port}]
    assert result["cluster"]["controller"] == 1 and result["cluster"]["clusterId"]
    assert result["created"] is True
    assert result["configs"]["retention.ms"] == {"value": "3600000", "isDefault": False, "source": 1}
    assert result["configs"]["segment.bytes"] == {"value": "1073741824", "isDefault": True, "source": 5}
    assert result["brokerConfigs"] == {"num.partitions": "1", "log.segment.bytes": "1073741824"}
    assert result["invalidName"]["type"] == "INVALID_TOPIC_EXCEPTION"
    assert result["deleteMissing"]["type"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert result["shrink"]["type"] == "INVALID_PARTITIONS"
    assert result["unknownTopic"]["type"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert result["acks"] == {"1": "0", "-1": "1"}
    assert [(b["partition"], b["errorCode"], b["baseOffset"]) for b in result["batch"]] == [(0, 0, "3")]
    assert [(o["low"], o["high"]) for o in result["offsets"]] == [("0", "5")]
    # kafkajs answers "no record that late" with the high watermark
    assert result["byTimestampPastEnd"] == [{"partition": 0, "offset": "5"}]
    assert result["byTimestampStart"] == [{"partition": 0, "offset": "0"}]
    assert [(o["low"], o["high"]) for o in result["offsetsAfterDeleteAll"]] == [("5", "5")]


def test_what_kafkajs_wrote_reads_back_with_librdkafka(broker: Broker) -> None:
    """Keys, null keys, repeated headers, timestamps and a multi-record batch from kafkajs, read by librdkafka."""
    topic = unique_topic("kjsread")
    result = run_js("produce_only.js", broker.bootstrap_servers, topic)
    assert result == {"baseOffsets": ["0", "1", "2"]}
    got = consume(broker.bootstrap_servers, topic, 4)
    assert [(r.offset, r.key, r.value) for r in got] == [
        (0, b"acks1", b"v1"), (1, b"acks-1", b"v-1"), (2, None, b"b1"), (3, None, b"b2")]
    assert got[0].headers == (("a", b"1"), ("b", b"x"), ("b", b"y"))
    assert got[0].timestamp == 1_700_000_000_000
