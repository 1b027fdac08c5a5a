"""The web inspector in headless Chromium, watching a broker that confluent-kafka drives.

Debian's chromium is driven by Python's playwright through `executable_path` (playwright's own browser
download is never used). The broker runs as `minikafka serve --admin-port 0`. Client, transactional and
group ids carry markup on purpose: the page must show them as text.
Set MINIKAFKA_INSPECTOR_SCREENSHOT=/path.png to keep screenshots of the page the tests saw (path-NAME.png),
and MINIKAFKA_CHROMIUM to use another chromium binary than the one on PATH.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from minikafka.testing import Broker

pytestmark = pytest.mark.e2e

CHROMIUM = os.environ.get("MINIKAFKA_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# What works in a container without a display or a sandbox, with nothing fetched from the network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# The page refreshes /state every second; a client's first request can take seconds (metadata, retries).
SEEN_MS = 20_000


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is not available")
    pytest.skip(f"{what} is not available")


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright (the python package)")
    if not os.access(CHROMIUM, os.X_OK):
        _missing(f"chromium ({CHROMIUM})")
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(mode="process") as broker:
        yield broker


@pytest.fixture
def page(playwright: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = playwright.chromium.launch_persistent_context(
        str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
        viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page = context.pages[0] if context.pages else context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    try:
        yield page
        _screenshot(page, request.node.name)
    finally:
        context.close()
    # The browser logs every 404 (a favicon, say) itself; anything else logged or thrown is a bug, a refused
    # Content-Security-Policy included.
    assert [e for e in errors if not e.startswith("Failed to load resource")] == []


def _screenshot(page: Any, name: str) -> None:
    screenshot = os.environ.get("MINIKAFKA_INSPECTOR_SCREENSHOT")
    if screenshot:
        page.screenshot(path=screenshot.removesuffix(".png") + f"-{name}.png", full_page=True)


def _admin(broker: Broker, client_id: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers, "client.id": client_id})


def _create_topic(admin: AdminClient, name: str, partitions: int = 1) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)


def _open(page: Any, broker: Broker, path: str = "/inspector") -> None:
    from playwright.sync_api import expect

    assert broker.admin_url is not None
    page.goto(broker.admin_url + path)
    expect(page.locator("#state-status")).to_contain_text("state at", timeout=SEEN_MS)


def test_a_transaction_appears_commits_and_leaves_and_its_requests_are_traced(broker: Broker, page: Any) -> None:
    from playwright.sync_api import expect

    unique = uuid.uuid4().hex[:8]
    topic = f"inspect-{unique}"
    transactional_id = f"txn-<b>{unique}</b>"
    client_id = f"inspector-<img src=x onerror=window.__xss=1>-{unique}"
    admin_client_id = f"inspector-admin-{unique}"
    _open(page, broker)

    _create_topic(_admin(broker, admin_client_id), topic, partitions=2)
    expect(page.locator("#topics tr.topic-row", has_text=topic)).to_have_count(1, timeout=SEEN_MS)
    expect(page.locator("#topics tbody tr", has_text=f"{topic}-1")).to_have_count(1)

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id,
                         "client.id": client_id, "linger.ms": 0})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"inspected", partition=1)
    assert producer.flush(15) == 0

    open_row = page.locator("#open-transactions tbody tr", has_text=transactional_id)
    expect(open_row).to_have_count(1, timeout=SEEN_MS)
    expect(open_row).to_contain_text("Ongoing")
    expect(open_row).to_contain_text(f"{topic}-1")
    # The partition holds the open transaction: log end 1, last stable offset still 0.
    partition_row = page.locator("#topics tbody tr", has_text=f"{topic}-1")
    expect(partition_row).to_contain_text("open from 0")
    assert partition_row.locator("td").nth(3).inner_text() == "0"
    assert partition_row.locator("td").nth(4).inner_text() == "1"
    _screenshot(page, "open-transaction")

    producer.commit_transaction(15)
    expect(open_row).to_have_count(0, timeout=SEEN_MS)
    producer_row = page.locator("#producers tbody tr", has_text=transactional_id)
    expect(producer_row).to_contain_text("CompleteCommit", timeout=SEEN_MS)
    # The commit marker moved the last stable offset past the record and the marker.
    expect(partition_row.locator("td").nth(3)).to_have_text("2", timeout=SEEN_MS)

    trace_rows = page.locator("#trace tbody tr")
    expect(trace_rows.filter(has_text=client_id).filter(has_text="EndTxn")).to_have_count(1, timeout=SEEN_MS)
    expect(trace_rows.filter(has_text=client_id).filter(has_text="InitProducerId").first).to_be_visible()
    expect(trace_rows.filter(has_text=admin_client_id).filter(has_text="CreateTopics").first).to_be_visible()

    page.fill("#filter-client-id", client_id)
    expect(trace_rows.filter(has_not_text=client_id)).to_have_count(0, timeout=SEEN_MS)
    expect(trace_rows.filter(has_text="EndTxn")).to_have_count(1, timeout=SEEN_MS)
    page.fill("#filter-api", "EndTxn")
    expect(trace_rows.filter(has_not_text="EndTxn")).to_have_count(0, timeout=SEEN_MS)
    expect(trace_rows).to_have_count(1)

    page.fill("#filter-api", "")
    page.fill("#filter-client-id", "")
    page.fill("#filter-topic", topic)
    expect(trace_rows.filter(has_not_text=topic)).to_have_count(0, timeout=SEEN_MS)
    expect(trace_rows.filter(has_text=client_id).filter(has_text="Produce").first).to_be_visible(timeout=SEEN_MS)
    expect(trace_rows.filter(has_text=admin_client_id).filter(has_text="CreateTopics")).to_have_count(1)
    del producer  # librdkafka lets go of its connections now, not when the broker is already gone

    # The ids were shown as text, never run as markup.
    assert page.evaluate("window.__xss") is None
    assert page.locator("#trace img, #producers b, #open-transactions b").count() == 0


def test_a_group_shows_members_assignment_committed_offsets_and_lag(broker: Broker, page: Any) -> None:
    from playwright.sync_api import expect

    unique = uuid.uuid4().hex[:8]
    topic, group = f"inspect-group-{unique}", f"group-<i>{unique}</i>"
    client_id = f"inspector-consumer-{unique}"
    _create_topic(_admin(broker, f"inspector-admin-{unique}"), topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for value in (b"one", b"two", b"three"):
        producer.produce(topic, value, partition=0)
    assert producer.flush(15) == 0
    _open(page, broker, "/")

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "client.id": client_id,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        group_row = page.locator("#groups tbody tr", has_text=group)
        # poll() keeps the member alive while the page is watched; the loop ends when the page shows it.
        for _ in range(200):
            message = consumer.poll(0.1)
            if message is not None and not message.error() and message.offset() == 0:
                consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
            if group_row.filter(has_text="lag 2").count():
                break
        expect(group_row).to_contain_text(f"{topic}-0: 1 (lag 2)")
        expect(group_row).to_contain_text("Stable")
        expect(group_row).to_contain_text(f"{client_id}")
        expect(group_row).to_contain_text(f"{topic} 0")
        expect(group_row.locator("td").nth(6)).to_have_text("2")
    finally:
        consumer.close()
    expect(group_row).to_contain_text("Empty", timeout=SEEN_MS)
    del producer


def test_a_client_s_own_metrics_beside_the_broker_s_view_of_it(page: Any) -> None:
    """Client telemetry (KIP-714): librdkafka pushes its producer metrics; the page shows them in the client's
    row with the requests the broker saw on its connections."""
    from minikafka.protocol.api_keys import ApiKey
    from minikafka.tools.admin_client import AdminClient as WireAdmin
    from playwright.sync_api import expect

    client_id = f"telemetry-<i>{uuid.uuid4().hex[:8]}</i>"
    with Broker({"minikafka.client.telemetry.enabled": "true"}, mode="process") as broker:
        with WireAdmin(broker.bootstrap_servers) as admin:
            admin.any_broker().request(ApiKey.INCREMENTAL_ALTER_CONFIGS, validate_only=False, resources=[{
                "resource_type": 16, "resource_name": "producers", "configs": [
                    {"name": "metrics", "config_operation": 0, "value": "org.apache.kafka.producer."},
                    {"name": "interval.ms", "config_operation": 0, "value": "500"}]}])
        _open(page, broker)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": client_id})
        try:
            producer.produce("telemetry-inspected", b"pushed")
            assert producer.flush(15) == 0
            row = page.locator("#clients tbody tr", has_text=client_id)
            expect(row).to_contain_text("org.apache.kafka.producer.request.latency.avg", timeout=SEEN_MS)
            expect(row).to_contain_text("org.apache.kafka.producer.record.queue.time.avg")
            expect(row).to_contain_text("Produce 1 requests")
            expect(row).to_contain_text("confluent-kafka-python")
            _screenshot(page, "client-telemetry")
        finally:
            producer.flush(5)
