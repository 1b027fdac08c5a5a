"""A raw Kafka connection: frames written and read by hand, for what no client library would send."""

from __future__ import annotations

import socket
import struct
from datetime import timedelta
from typing import Protocol

from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from minikafka.protocol.codec import decode_response, encode_request


class Listening(Protocol):
    """A broker under test (minikafka.testing.Broker, in either mode)."""

    port: int


class Wire:
    """A connection to a broker's Kafka port that sends and receives whole size-prefixed frames."""

    def __init__(self, broker: Listening, timeout: float = 10) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=timeout)

    def send(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def receive(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def is_closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, TimeoutError):
            return True

    def close(self) -> None:
        self.sock.close()


def produce_raw(wire: Wire, corr: int, topic: str, records: bytes, *, partition: int = 0, acks: int = -1) -> object:
    """One Produce v9 request of raw `records` (a record batch) to one partition; returns its answer."""
    request = ProduceRequest(transactional_id=None, acks=acks, timeout=timedelta(seconds=5), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=partition, records=records),)),))
    wire.send(encode_request(corr, request))
    answer_corr, response = decode_response(wire.receive(), 0, 9)
    assert answer_corr == corr
    return response.responses[0].partition_responses[0]
