"""Golden bytes: every request frame of the fuzz corpus decodes and re-encodes to the very bytes recorded.

The corpus (tests/fuzz/corpus.jsonl, recorded by tests/fuzz/recorder.py) holds 290 frames: 264 sent by
real clients (confluent-kafka, aiokafka, kafka-python, kcat, kafkajs) and 26 written by minikafka's own
codec ("minikafka-wire", for served APIs no client sends: DescribeTopicPartitions, SaslAuthenticate, and
the share-group, telemetry, quota, log-dir, election and reassignment APIs of issue 48). Each goes through
`decode_request` and back through `encode_request` (the request header through kio's writer, the body
through the compiled writer of protocol/encoder.py). A frame whose bytes come back different means the
codec reads a client's request as something other than what it sent, or a codec change altered what it
writes.

Two librdkafka frames do not come back whole, for a reason outside the codec: librdkafka writes bytes
after the request body, which Kafka ignores and `decode_request` counts as trailing bytes. Their
re-encoding is the frame without those bytes; WITH_TRAILING_BYTES lists each frame, the bytes and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest
from minikafka.protocol.api_keys import api_name
from minikafka.protocol.codec import decode_request, encode_request

from tests.fuzz import corpus
from tests.fuzz.corpus import CorpusFrame

FRAMES = corpus.load()
# What the corpus held when this test was written; a re-recorded corpus should be looked at, not absorbed.
RECORDED_FRAMES = 290
REAL_CLIENTS = {"confluent-kafka", "aiokafka", "kafka-python", "kcat", "kafkajs"}


@dataclass(frozen=True)
class TrailingBytes:
    client: str
    frame_hex: str  # the whole recorded frame (correlation id 0, no size prefix)
    trailing: bytes  # what Kafka and the codec leave unread at the end
    reason: str


WITH_TRAILING_BYTES = (
    TrailingBytes(
        client="confluent-kafka",
        frame_hex="0003000d00000000000772646b61666b610000000000010000",
        trailing=bytes.fromhex("010000"),
        reason="Metadata v13 for all topics. rd_kafka_MetadataRequest0 (librdkafka src/rdkafka_request.c) "
               "reserves the topic array count as an int32 (rd_kafka_buf_write_arraycnt_pos) and, for all "
               "topics, never finalizes it into a varint, so 00 00 00 00 goes out where one 00 (null) was "
               "meant. Kafka reads the first 00 as null topics and the next three as AllowAutoTopicCreation "
               "false, IncludeTopicAuthorizedOperations false and no tags; the bytes the client meant for "
               "those (01 00 00) are left over.",
    ),
    TrailingBytes(
        client="confluent-kafka",
        frame_hex="0033000000000000000772646b61666b6100020b667a6164653636392d760200020b667a6164653636392d7501"
                  "000010000573616c7421609a62b5b687ba6592b12a552c79fe3bf19e4e145a167b795b7acab5e89fa0f6000000",
        trailing=bytes.fromhex("00"),
        reason="AlterUserScramCredentials v0. The request's top-level empty tagged fields are written twice: "
               "at the end of rd_kafka_AlterUserScramCredentialsRequest (src/rdkafka_admin.c) and again by "
               "rd_kafka_buf_finalize (src/rdkafka_broker.c), which ends every flexible request with them.",
    ),
)
_TRAILING_BY_FRAME = {bytes.fromhex(known.frame_hex): known for known in WITH_TRAILING_BYTES}


def _case_ids(frames: list[CorpusFrame]) -> list[str]:
    seen: Counter[tuple[str, int, int]] = Counter()
    ids = []
    for frame in frames:
        key = (frame.client, frame.api_key, frame.api_version)
        seen[key] += 1
        ids.append(f"{api_name(frame.api_key).lower()}-v{frame.api_version}-{frame.client}-{seen[key]}")
    return ids


def test_the_corpus_is_the_one_recorded() -> None:
    clients = Counter(frame.client for frame in FRAMES)
    assert len(FRAMES) == RECORDED_FRAMES
    assert set(clients) == REAL_CLIENTS | {corpus.WIRE_CLIENT}
    assert clients[corpus.WIRE_CLIENT] == 26


@pytest.mark.parametrize("frame", FRAMES, ids=_case_ids(FRAMES))
def test_a_recorded_request_re_encodes_to_its_bytes(frame: CorpusFrame) -> None:
    decoded = decode_request(frame.frame, frame.api_key, frame.api_version)
    # The corpus stores every frame with correlation id 0 (corpus.CorpusFrame.shape).
    encoded = encode_request(0, decoded.body, decoded.client_id)[4:]
    known = _TRAILING_BY_FRAME.get(frame.frame)
    if known is None:
        assert decoded.trailing_bytes == 0
        assert encoded.hex() == frame.frame.hex()
    else:
        assert frame.client == known.client
        assert decoded.trailing_bytes == len(known.trailing)
        assert encoded.hex() + known.trailing.hex() == frame.frame.hex()


def test_every_listed_exception_is_in_the_corpus() -> None:
    """An entry of WITH_TRAILING_BYTES that matches no frame is stale: the list must stay exact."""
    recorded = {frame.frame for frame in FRAMES}
    assert [known.frame_hex for known in WITH_TRAILING_BYTES if bytes.fromhex(known.frame_hex) not in recorded] == []
