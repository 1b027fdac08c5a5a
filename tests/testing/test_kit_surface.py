"""What `minikafka.testing` shows a user: the errors it documents are importable from it, help() lists
them with Broker, the documented Broker(...) signature is the real one, and state() keys transactions by
transactional id as it keys topics and groups by name."""

from __future__ import annotations

import inspect
import pydoc
import re
import uuid
from pathlib import Path

import minikafka.testing
import pytest
from confluent_kafka import Producer
from minikafka.testing import Broker, ConfigError, FaultSpecError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def test_the_documented_errors_are_importable_and_raised() -> None:
    with Broker() as broker, pytest.raises(FaultSpecError):
        broker.add_fault("Metadata", "NOT_CONTROLLER", group_id="never-named-by-metadata")
    with pytest.raises(ConfigError):
        Broker({"num.partitions": "many"}).start()


def test_help_lists_what_the_package_offers() -> None:
    text = pydoc.render_doc(minikafka.testing, renderer=pydoc.plaintext)
    for name in ("class Broker", "BrokerError", "ConfigError", "FaultSpecError"):
        assert name in text, name


def test_the_documented_signature_is_the_real_one() -> None:
    documented = re.search(r"`Broker\((.*?)\)`", DOCS.read_text(), re.S)
    assert documented is not None
    named = set(re.findall(r"(\w+)=", documented.group(1)))
    real = {name for name in inspect.signature(Broker).parameters if name != "self"}
    assert named == real, (named, real)


def test_state_keys_transactions_by_transactional_id() -> None:
    transactional_id = f"txn-{uuid.uuid4().hex[:8]}"
    with Broker() as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id})
        producer.init_transactions(15)
        producer.begin_transaction()
        producer.produce(f"t-{transactional_id}", b"value")
        producer.flush(15)
        state = broker.state()
        assert isinstance(state["topics"], dict) and isinstance(state["groups"], dict)
        entry = state["transactions"][transactional_id]
        assert entry["transactional_id"] == transactional_id and entry["state"] == "Ongoing"
        producer.commit_transaction(15)
        assert broker.state()["transactions"][transactional_id]["state"] == "CompleteCommit"
