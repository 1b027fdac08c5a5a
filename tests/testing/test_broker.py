"""minikafka.testing.Broker in both modes, driven by real clients (confluent-kafka, aiokafka) over sockets."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from minikafka.broker.config.config import ConfigError
from minikafka.testing import Broker, BrokerError, Mode, scratch

from tests.support.produce import SEND_AT_ONCE, produce

pytestmark = pytest.mark.e2e

MODES: tuple[Mode, ...] = ("inprocess", "process")
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
UNCLEAN_RECOVERY_LINE = "recovered logs after unclean shutdown"

# Returns only once every record is acknowledged (an idempotent producer asks for acks=all).
IDEMPOTENT = {"enable.idempotence": True, **SEND_AT_ONCE}


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> Mode:
    return request.param  # type: ignore[no-any-return]


def _topic() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def _consume(bootstrap: str, topic: str, count: int, timeout: float = 30.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        for message in consumer.consume(num_messages=count, timeout=timeout):
            assert message.error() is None, message.error()
            values.append(message.value())
        # consume() may return early with fewer; keep polling to the deadline (bounded by the count check).
        polls = 0
        while len(values) < count and polls < int(timeout):
            polls += 1
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def _partition_count(bootstrap: str, topic: str) -> int:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return len(metadata.topics[topic].partitions)


@pytest.fixture
def broker(mode: Mode) -> Iterator[Broker]:
    with Broker(mode=mode) as broker:
        yield broker


def test_produce_and_consume_with_confluent_kafka(broker: Broker) -> None:
    topic = _topic()
    assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}" and broker.port > 0
    assert produce(broker.bootstrap_servers, topic, [b"a", b"b", b"c"], timeout=30, **IDEMPOTENT) == []
    assert _consume(broker.bootstrap_servers, topic, 3) == [b"a", b"b", b"c"]


async def test_produce_and_consume_with_aiokafka(broker: Broker) -> None:
    # The test's own event loop (pytest-asyncio) runs here while an in-process broker runs on its own.
    topic = _topic()
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    await producer.start()
    try:
        for value in (b"x", b"y"):
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
                                group_id=f"g-{uuid.uuid4().hex[:8]}")
    await consumer.start()
    try:
        received = [(await asyncio.wait_for(consumer.getone(), 30)).value for _ in range(2)]
    finally:
        await consumer.stop()
    assert received == [b"x", b"y"]


def test_config_is_passed_through(mode: Mode) -> None:
    with Broker({"num.partitions": 3, "auto.create.topics.enable": True}, mode=mode) as broker:
        topic = _topic()
        assert produce(broker.bootstrap_servers, topic, [b"v"], timeout=30, **IDEMPOTENT) == []
        assert _partition_count(broker.bootstrap_servers, topic) == 3


def test_bad_config_is_a_config_error_and_leaves_nothing_behind(mode: Mode, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Wherever the kit would make its directory: in memory (scratch), or tempfile's place where TMPDIR is set.
    monkeypatch.setattr(scratch, "MEMORY_ROOT", str(tmp_path))
    monkeypatch.setattr(scratch, "MEMORY_MIN_FREE_BYTES", 0)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ConfigError, match=r"num\.partitions"):
        Broker({"num.partitions": "many"}, mode=mode).start()
    assert list(tmp_path.iterdir()) == []


def test_restart_keeps_data_and_port(broker: Broker) -> None:
    topic = _topic()
    port = broker.port
    assert produce(broker.bootstrap_servers, topic, [b"before"], timeout=30, **IDEMPOTENT) == []
    broker.restart()
    assert broker.port == port
    assert (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists() is False  # taken when the broker started again
    assert UNCLEAN_RECOVERY_LINE not in broker.logs()
    assert produce(broker.bootstrap_servers, topic, [b"after"], timeout=30, **IDEMPOTENT) == []
    assert _consume(broker.bootstrap_servers, topic, 2) == [b"before", b"after"]


def test_kill_then_start_recovers_acknowledged_data(broker: Broker) -> None:
    topic = _topic()
    port = broker.port
    values = [f"v{i}".encode() for i in range(200)]
    assert produce(broker.bootstrap_servers, topic, values, timeout=30, **IDEMPOTENT) == []
    broker.kill()
    assert not broker.running
    # A crash writes no clean-shutdown marker, so the next start must recover the logs.
    assert not (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    broker.start()
    assert broker.port == port
    assert UNCLEAN_RECOVERY_LINE in broker.logs()
    assert _consume(broker.bootstrap_servers, topic, len(values)) == values


def test_hard_restart_recovers_and_the_run_log_holds_the_latest_start_only(broker: Broker) -> None:
    topic = _topic()
    assert produce(broker.bootstrap_servers, topic, [b"before"], timeout=30, **IDEMPOTENT) == []
    broker.restart(hard=True)
    assert UNCLEAN_RECOVERY_LINE in broker.run_log()
    broker.restart()
    assert UNCLEAN_RECOVERY_LINE not in broker.run_log() and UNCLEAN_RECOVERY_LINE in broker.logs()
    assert "broker ready" in broker.run_log()
    assert _consume(broker.bootstrap_servers, topic, 1) == [b"before"]


def test_pid_alive_and_the_exit_code_of_a_stop(broker: Broker) -> None:
    assert broker.alive
    assert (broker.pid == os.getpid()) is (broker.mode == "inprocess")
    assert broker.stop() == 0
    assert not broker.alive
    assert broker.stop() == 0  # not running: nothing to stop
    with pytest.raises(BrokerError, match="not running"):
        _ = broker.pid


def test_process_mode_without_admin_listener_and_with_serve_args(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    with Broker(mode="process", admin_listener=False, serve_args=("--trace", str(trace))) as broker:
        assert broker.admin_url is None
        assert produce(broker.bootstrap_servers, _topic(), [b"v"], timeout=30, **IDEMPOTENT) == []
    assert "Produce" in {json.loads(line)["api"] for line in trace.read_text().splitlines()}
    with pytest.raises(ValueError, match="mode='process'"):
        Broker(serve_args=("--trace", str(trace)))


def test_clean_stop_writes_the_clean_shutdown_marker(broker: Broker) -> None:
    assert produce(broker.bootstrap_servers, _topic(), [b"v"], timeout=30, **IDEMPOTENT) == []
    broker.stop()
    assert (broker.data_dir / CLEAN_SHUTDOWN_MARKER).exists()


def test_own_temporary_directory_is_removed_and_a_given_one_kept(mode: Mode, tmp_path: Path) -> None:
    with Broker(mode=mode) as own:
        own_data = own.data_dir
        assert own_data.is_dir()
    assert not own_data.exists()

    given = tmp_path / "data"
    log_file = tmp_path / "broker.log"
    with Broker(mode=mode, data_dir=given, log_file=log_file) as broker:
        assert produce(broker.bootstrap_servers, "kept", [b"v"], timeout=30, **IDEMPOTENT) == []
    assert (given / "kept-0").is_dir()
    assert "broker ready" in log_file.read_text()


def test_in_process_broker_leaves_the_callers_loop_and_logging_alone(capfd: pytest.CaptureFixture[str],
                                                                      tmp_path: Path) -> None:
    policy = asyncio.get_event_loop_policy()
    structlog_config = structlog.get_config()
    processors = list(structlog_config["processors"])
    log_file = tmp_path / "broker.log"
    with Broker(log_file=log_file) as broker:
        assert produce(broker.bootstrap_servers, _topic(), [b"v"], timeout=30, **IDEMPOTENT) == []
        assert asyncio.get_event_loop_policy() is policy
        assert "uvloop" not in type(asyncio.get_event_loop_policy()).__module__
    logs = log_file.read_text()
    assert structlog.get_config()["processors"][: len(processors) - 1] == processors[:-1]
    assert "broker ready" in logs and "broker stopped" in logs
    captured = capfd.readouterr()
    assert "broker ready" not in captured.out + captured.err


def test_other_threads_still_log_where_they_did(capfd: pytest.CaptureFixture[str]) -> None:
    marker = f"caller-line-{os.getpid()}"
    with Broker() as broker:
        structlog.get_logger("caller").info(marker)
        logs = broker.logs()
    captured = capfd.readouterr()
    assert marker in captured.out + captured.err
    assert marker not in logs
