"""`dump-log --offsets-decoder` on KIP-848 consumer group records: Kafka's OffsetsMessageParser JSON."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from minikafka.coordinator.group.records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    encode_consumer_group_key,
    encode_consumer_group_value,
)
from minikafka.protocol.records import Record, build_batch

from .test_dump_log import BASE, run

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")
TOPIC_ID_TEXT = "ASNFZ4mrze8BI0VniavN7w"  # Kafka's Uuid.toString: URL-safe base64, no padding


def test_consumer_group_records_print_as_kafkas_json(tmp_path: Path) -> None:
    member = ConsumerGroupMemberMetadataValue(None, None, "rdkafka", "/127.0.0.1", ("t",), None, 300000, None)
    records = [
        (ConsumerGroupKey(5, "g", member_id="m1"), member),
        (ConsumerGroupKey(16, "g", regex="t.*"), ConsumerGroupRegularExpressionValue(("t",), 0, 1700)),
        (ConsumerGroupKey(3, "g"), ConsumerGroupMetadataValue(2, 99)),
        (ConsumerGroupKey(7, "g", member_id="m1"), ConsumerGroupTargetAssignmentMemberValue(((TOPIC_ID, (0, 1)),))),
        (ConsumerGroupKey(6, "g"), ConsumerGroupTargetAssignmentMetadataValue(2)),
        (ConsumerGroupKey(8, "g", member_id="m1"),
         ConsumerGroupCurrentMemberAssignmentValue(2, 1, 0, ((TOPIC_ID, (0, 1)),), ())),
        (ConsumerGroupKey(4, "g"), None),
        (ConsumerGroupKey(8, "g", member_id="m1"), None),
    ]
    encoded = [Record(encode_consumer_group_key(k), None if v is None else encode_consumer_group_value(v), (), 5)
               for k, v in records]
    log = tmp_path / f"{BASE}.log"
    log.write_bytes(build_batch(encoded))
    status, out, err = run("--files", str(log), "--offsets-decoder", "--skip-record-metadata")
    assert (status, err) == (0, [])
    assert out[3:] == [
        '| key: {"type":"5","data":{"groupId":"g","memberId":"m1"}} payload: {"version":"0","data":{'
        '"instanceId":null,"rackId":null,"clientId":"rdkafka","clientHost":"/127.0.0.1",'
        '"subscribedTopicNames":["t"],"subscribedTopicRegex":null,"rebalanceTimeoutMs":300000,'
        '"serverAssignor":null}}',
        '| key: {"type":"16","data":{"groupId":"g","regularExpression":"t.*"}} payload: {"version":"0",'
        '"data":{"topics":["t"],"version":0,"timestamp":1700}}',
        '| key: {"type":"3","data":{"groupId":"g"}} payload: {"version":"0","data":{"epoch":2,'
        '"metadataHash":99}}',
        '| key: {"type":"7","data":{"groupId":"g","memberId":"m1"}} payload: {"version":"0","data":{'
        f'"topicPartitions":[{{"topicId":"{TOPIC_ID_TEXT}","partitions":[0,1]}}]}}}}',
        '| key: {"type":"6","data":{"groupId":"g"}} payload: {"version":"0","data":{"assignmentEpoch":2}}',
        '| key: {"type":"8","data":{"groupId":"g","memberId":"m1"}} payload: {"version":"0","data":{'
        f'"memberEpoch":2,"previousMemberEpoch":1,"state":0,"assignedPartitions":[{{"topicId":"{TOPIC_ID_TEXT}",'
        '"partitions":[0,1]}],"partitionsPendingRevocation":[]}}',
        '| key: {"type":"4","data":{"groupId":"g"}} payload: <DELETE>',
        '| key: {"type":"8","data":{"groupId":"g","memberId":"m1"}} payload: <DELETE>',
    ]
    # --json (one object per line) nests the same objects, a tombstone's payload as null
    status, out, err = run("--files", str(log), "--offsets-decoder", "--json")
    assert (status, err) == (0, [])
    events = [json.loads(line) for line in out]
    payloads = [(e["key"]["type"], e["payload"]) for e in events if "payload" in e]
    assert len(payloads) == len(records)
    assert payloads[2] == ("3", {"version": "0", "data": {"epoch": 2, "metadataHash": 99}})
    assert payloads[-1] == ("8", None)
