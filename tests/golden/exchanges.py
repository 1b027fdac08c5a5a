"""Recorded request/response pairs (tests/golden/responses.json) and the broker and socket they are played on.

Written by tests/golden/record_responses.py, replayed by tests/golden/test_responses.py. Each exchange is a
request frame and the response frame the broker sent back, both as hex without their 4-byte size prefix,
in the order they were sent on one connection.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.build import build
from minikafka.protocol.codec import decode_response, encode_request, request_schema
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import Broker

from tests.support.waiting import poll_until

GOLDEN_PATH = Path(__file__).with_name("responses.json")
# The manual clock keeps every timer (sessions, rebalances, transaction timeouts) still, so no deadline a
# slow machine passes changes an answer. A fixed cluster id makes Metadata's comparable byte for byte.
BROKER_CONFIG: dict[str, str] = {"minikafka.clock": "manual", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qg"}
SOCKET_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Settle:
    """What to wait for after an exchange before the next: the last stable offset of a partition reaching
    `offset` (EndTxn is answered before its markers are written)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Exchange:
    name: str
    api_key: int
    api_version: int
    request: bytes
    response: bytes
    settle: Settle | None = None


def load(path: Path = GOLDEN_PATH) -> list[Exchange]:
    document = json.loads(path.read_text())
    if document["broker_config"] != BROKER_CONFIG:
        raise ValueError(f"{path} was recorded with broker config {document['broker_config']}, not {BROKER_CONFIG}")
    return [
        Exchange(entry["name"], entry["api_key"], entry["api_version"], bytes.fromhex(entry["request"]),
                 bytes.fromhex(entry["response"]), Settle(**entry["settle"]) if entry.get("settle") else None)
        for entry in document["exchanges"]
    ]


def save(exchanges: list[Exchange], path: Path = GOLDEN_PATH) -> None:
    entries = []
    for exchange in exchanges:
        entry: dict[str, object] = {"name": exchange.name, "api_key": exchange.api_key,
                                    "api_version": exchange.api_version, "request": exchange.request.hex(),
                                    "response": exchange.response.hex()}
        if exchange.settle is not None:
            entry["settle"] = {"topic": exchange.settle.topic, "partition": exchange.settle.partition,
                               "offset": exchange.settle.offset}
        entries.append(entry)
    document = {"recorded_by": "tests/golden/record_responses.py", "broker_config": BROKER_CONFIG,
                "exchanges": entries}
    path.write_text(json.dumps(document, indent=1) + "\n")


@contextmanager
def golden_broker() -> Iterator[Broker]:
    """A fresh in-process broker with BROKER_CONFIG whose coordinators have loaded: before that their APIs
    answer COORDINATOR_LOAD_IN_PROGRESS, which would make the first group request's answer a race."""
    with Broker(BROKER_CONFIG) as broker:
        # Closed before the test's own connection: the probing requests are no part of the exchanges.
        with Wire(broker.port) as wire:
            poll_until(lambda: _coordinators_loaded(wire), message="the coordinators loaded")
        yield broker


def _coordinators_loaded(wire: Wire) -> bool:
    """Asked over the wire (the log line's format depends on how logging is set up by whoever runs the
    tests): a group and a transaction lookup no longer answer COORDINATOR_LOAD_IN_PROGRESS."""
    groups = build(request_schema(ApiKey.OFFSET_FETCH, 8), groups=[{"group_id": "probe", "topics": None}])
    _correlation, fetched = decode_response(wire.exchange(encode_request(1, groups)[4:]), ApiKey.OFFSET_FETCH, 8)
    transactions = build(request_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0), transactional_ids=["probe"])
    _correlation, described = decode_response(wire.exchange(encode_request(2, transactions)[4:]),
                                              ApiKey.DESCRIBE_TRANSACTIONS, 0)
    loading = ErrorCode.coordinator_load_in_progress
    return (all(group.error_code != loading for group in fetched.groups)
            and all(state.error_code != loading for state in described.transaction_states))


class Wire:
    """One connection to the broker: whole frames out, whole frames in (without their size prefix)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S)

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.sock.close()

    def exchange(self, request: bytes) -> bytes:
        self.sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def _exactly(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return bytes(data)
