"""KIP-848 consumer group records: bytes against Kafka 4.1's schemas, and a coordinator restarted on
the same `__consumer_offsets` (in-memory log, fake clock) getting its consumer groups back."""

from __future__ import annotations

import uuid

import pytest
from minikafka.coordinator.group import GroupConfig, GroupCoordinator, OffsetCommit
from minikafka.coordinator.group.consumer import ConsumerGroupState, HeartbeatRequest, MemberState
from minikafka.coordinator.group.records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    OffsetKey,
    decode_consumer_group_value,
    decode_key,
    encode_consumer_group_key,
    encode_consumer_group_value,
)
from minikafka.protocol.errors import CorruptRecord, ErrorCode

from .fakes import FakeClock
from .outcomes import raised
from .test_consumer import GROUP, REBALANCE_MS, SESSION_MS, TopicLogs, beat, join
from .test_records import i16, i32, i64, s

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")
RETENTION_MS = 7 * 24 * 3600 * 1000
CHECK_MS = 600_000


def cs(text: str | None) -> bytes:
    """A compact (flexible) string: uvarint length + 1, 0 for null."""
    if text is None:
        return b"\x00"
    data = text.encode()
    return bytes([len(data) + 1]) + data


NO_TAGS = b"\x00"


# -- bytes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected"), [
    (ConsumerGroupKey(3, "grp"), i16(3) + s("grp")),
    (ConsumerGroupKey(4, "grp"), i16(4) + s("grp")),
    (ConsumerGroupKey(5, "grp", member_id="m1"), i16(5) + s("grp") + s("m1")),
    (ConsumerGroupKey(6, "grp"), i16(6) + s("grp")),
    (ConsumerGroupKey(7, "grp", member_id="m1"), i16(7) + s("grp") + s("m1")),
    (ConsumerGroupKey(8, "grp", member_id="m1"), i16(8) + s("grp") + s("m1")),
    (ConsumerGroupKey(16, "grp", regex="t.*"), i16(16) + s("grp") + s("t.*")),
])
def test_keys_carry_kafkas_record_type_and_legacy_strings(key: ConsumerGroupKey, expected: bytes) -> None:
    assert encode_consumer_group_key(key) == expected
    assert decode_key(expected) == key


def test_group_epoch_value_with_the_metadata_hash_tag() -> None:
    value = ConsumerGroupMetadataValue(epoch=7, metadata_hash=-2)
    expected = i16(0) + i32(7) + b"\x01" + b"\x00" + b"\x08" + i64(-2)
    assert encode_consumer_group_value(value) == expected
    assert decode_consumer_group_value(3, expected) == value
    # hash 0 is the tag's default: not written
    assert encode_consumer_group_value(ConsumerGroupMetadataValue(7)) == i16(0) + i32(7) + NO_TAGS


def test_member_metadata_value() -> None:
    value = ConsumerGroupMemberMetadataValue(
        instance_id=None, rack_id="r1", client_id="cli", client_host="/127.0.0.1",
        subscribed_topic_names=("a", "b"), subscribed_topic_regex=None, rebalance_timeout_ms=300000,
        server_assignor="uniform",
    )
    expected = (i16(0) + cs(None) + cs("r1") + cs("cli") + cs("/127.0.0.1") + b"\x03" + cs("a") + cs("b")
                + cs(None) + i32(300000) + cs("uniform") + NO_TAGS)
    assert encode_consumer_group_value(value) == expected
    assert decode_consumer_group_value(5, expected) == value


def test_member_metadata_value_with_classic_member_metadata() -> None:
    value = ConsumerGroupMemberMetadataValue(None, None, "c", "h", (), "t.*", -1, None,
                                             classic_protocols=(("range", b"\x00\x01"),),
                                             classic_session_timeout_ms=45000)
    # ClassicMemberMetadata {SessionTimeoutMs int32, SupportedProtocols [{Name, Metadata}]}
    classic = i32(45000) + b"\x02" + cs("range") + b"\x03\x00\x01" + NO_TAGS + NO_TAGS
    expected = (i16(0) + cs(None) + cs(None) + cs("c") + cs("h") + b"\x01" + cs("t.*") + i32(-1) + cs(None)
                + b"\x01" + b"\x00" + bytes([len(classic)]) + classic)
    assert encode_consumer_group_value(value) == expected
    assert decode_consumer_group_value(5, expected) == value


def test_assignment_values() -> None:
    partitions = b"\x02" + TOPIC_ID.bytes + b"\x03" + i32(0) + i32(2) + NO_TAGS
    target = ConsumerGroupTargetAssignmentMemberValue(((TOPIC_ID, (0, 2)),))
    assert encode_consumer_group_value(target) == i16(0) + partitions + NO_TAGS
    assert decode_consumer_group_value(7, i16(0) + partitions + NO_TAGS) == target

    current = ConsumerGroupCurrentMemberAssignmentValue(5, 4, 1, ((TOPIC_ID, (0, 2)),), ())
    expected = i16(0) + i32(5) + i32(4) + b"\x01" + partitions + b"\x01" + NO_TAGS
    assert encode_consumer_group_value(current) == expected
    assert decode_consumer_group_value(8, expected) == current

    epoch = ConsumerGroupTargetAssignmentMetadataValue(9)
    assert encode_consumer_group_value(epoch) == i16(0) + i32(9) + NO_TAGS
    assert decode_consumer_group_value(6, i16(0) + i32(9) + NO_TAGS) == epoch


def test_a_later_kafkas_tagged_fields_are_skipped() -> None:
    # AssignmentEpochs (KIP-1251, tag 0 of a TopicPartitions entry) and AssignmentTimestamp (tag 0 of
    # the target assignment metadata) come after 4.1.
    epochs_tag = b"\x01" + b"\x00" + b"\x09" + b"\x03" + i32(4) + i32(7)
    entry = TOPIC_ID.bytes + b"\x03" + i32(0) + i32(1) + epochs_tag
    data = i16(0) + i32(5) + i32(4) + b"\x00" + b"\x02" + entry + b"\x01" + NO_TAGS
    assert decode_consumer_group_value(8, data) == ConsumerGroupCurrentMemberAssignmentValue(
        5, 4, 0, ((TOPIC_ID, (0, 1)),), ())
    data = i16(0) + i32(9) + b"\x01" + b"\x00" + b"\x08" + i64(1234)
    assert decode_consumer_group_value(6, data) == ConsumerGroupTargetAssignmentMetadataValue(9)


def test_regular_expression_value() -> None:
    value = ConsumerGroupRegularExpressionValue(("t1", "t2"), 12, 1700)
    expected = i16(0) + b"\x03" + cs("t1") + cs("t2") + i64(12) + i64(1700) + NO_TAGS
    assert encode_consumer_group_value(value) == expected
    assert decode_consumer_group_value(16, expected) == value


@pytest.mark.parametrize("data", [
    i16(1) + i32(7) + NO_TAGS,  # unknown value version
    i16(0) + i32(7),  # no tag section
    i16(0) + b"\x7f",  # an array longer than the record
])
def test_bad_values_are_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptRecord):
        decode_consumer_group_value(3 if len(data) != 3 else 7, data)


# -- a coordinator restarted on the same log -----------------------------------------------------


def make() -> tuple[GroupCoordinator, TopicLogs, FakeClock]:
    logs, clock = TopicLogs(), FakeClock()
    logs.create_topic("t", 6)
    logs.create_topic("other", 2)
    coordinator = restart(logs, clock)
    return coordinator, logs, clock


def restart(logs: TopicLogs, clock: FakeClock) -> GroupCoordinator:
    coordinator = GroupCoordinator(logs, clock, GroupConfig(offsets_topic_num_partitions=3,
                                                            offsets_retention_ms=RETENTION_MS))
    coordinator.load()
    return coordinator


def written(logs: TopicLogs, coordinator: GroupCoordinator) -> list[tuple[ConsumerGroupKey | OffsetKey | None,
                                                                          ConsumerGroupValue | None]]:
    """Every record of the group's `__consumer_offsets` partition, decoded."""
    out: list[tuple[ConsumerGroupKey | OffsetKey | None, ConsumerGroupValue | None]] = []
    for batch in coordinator.topic.batches(coordinator.partition_for(GROUP)):
        for record in batch.records:
            key = decode_key(record.key)
            value = None
            if isinstance(key, ConsumerGroupKey) and record.value is not None:
                value = decode_consumer_group_value(key.record_type, record.value)
            out.append((key, value))  # type: ignore[arg-type]
    return out


def stable_pair(c: GroupCoordinator) -> dict[str, int]:
    """Two members reconciled to the group's epoch; their epochs by member id."""
    a = join(c, "a")
    b = join(c, "b")
    a = beat(c, "a", a.member_epoch, owned=a.assignment)  # gives up what b gets
    a = beat(c, "a", a.member_epoch, owned=a.assignment)
    b = beat(c, "b", b.member_epoch, owned={})
    group = c.consumer_group(GROUP)
    assert group is not None and group.state() is ConsumerGroupState.STABLE, group
    return {m.member_id: m.member_epoch for m in group.members.values()}


def test_a_join_writes_kafkas_records_in_kafkas_order() -> None:
    c, logs, _ = make()
    join(c, "a")
    types = [key.record_type for key, _ in written(logs, c) if isinstance(key, ConsumerGroupKey)]
    # subscription, group epoch, target assignment, assignment epoch, current assignment
    assert types == [5, 3, 7, 6, 8]
    values = dict((key.record_type, value) for key, value in written(logs, c)  # type: ignore[union-attr]
                  if isinstance(key, ConsumerGroupKey))
    assert values[3] == ConsumerGroupMetadataValue(1, values[3].metadata_hash)  # type: ignore[union-attr]
    assert values[5].subscribed_topic_names == ("t",)  # type: ignore[union-attr]
    topic_id = logs.topic("t").topic_id  # type: ignore[union-attr]
    assert values[8] == ConsumerGroupCurrentMemberAssignmentValue(1, 0, 0, ((topic_id, tuple(range(6))),), ())
    # A heartbeat that changes nothing writes nothing.
    before = len(written(logs, c))
    beat(c, "a", 1, owned={"t": frozenset(range(6))})
    assert len(written(logs, c)) == before


def test_a_restarted_coordinator_has_the_group_and_members_go_on() -> None:
    c, logs, clock = make()
    epochs = stable_pair(c)
    group = c.consumer_group(GROUP)
    assert group is not None
    expected = {m.member_id: (m.member_epoch, m.previous_member_epoch, m.assigned, m.state)
                for m in group.members.values()}
    target, group_epoch = dict(group.target), group.group_epoch

    c2 = restart(logs, clock)
    loaded = c2.consumer_group(GROUP)
    assert loaded is not None and loaded.state() is ConsumerGroupState.STABLE
    assert (loaded.group_epoch, loaded.assignment_epoch, loaded.target) == (group_epoch, group_epoch, target)
    assert {m.member_id: (m.member_epoch, m.previous_member_epoch, m.assigned, m.state)
            for m in loaded.members.values()} == expected
    assert GROUP not in c2.groups  # no classic group beside it
    records_before = len(written(logs, c2))
    for member_id, epoch in epochs.items():
        result = beat(c2, member_id, epoch, owned=expected[member_id][2])
        assert (result.error, result.member_epoch) == (ErrorCode.none, epoch)
    assert loaded.group_epoch == group_epoch
    # Nothing changed, so the heartbeats wrote nothing: what was replayed counts as written.
    assert len(written(logs, c2)) == records_before


def test_sessions_restart_on_load() -> None:
    c, logs, clock = make()
    join(c, "a")
    clock.now += SESSION_MS - 1_000  # the old session would end in 1 s
    c2 = restart(logs, clock)
    clock.now += SESSION_MS - 1
    c2.timers.run_due(clock.now)
    assert "a" in c2.consumer_group(GROUP).members  # type: ignore[union-attr]
    clock.now += 1
    c2.timers.run_due(clock.now)
    assert not c2.consumer_group(GROUP).members  # type: ignore[union-attr]
    # The fencing was written: a third start has the group, empty, at the bumped epoch.
    c3 = restart(logs, clock)
    assert c3.consumer_group(GROUP).members == {}  # type: ignore[union-attr]
    assert c3.consumer_group(GROUP).group_epoch == 2  # type: ignore[union-attr]


def test_a_member_mid_revocation_is_replayed_with_its_pending_partitions() -> None:
    c, logs, clock = make()
    a = join(c, "a")
    join(c, "b")
    a = beat(c, "a", a.member_epoch, owned=a.assignment)  # told to give up b's share
    member = c.consumer_group(GROUP).members["a"]  # type: ignore[union-attr]
    assert member.state is MemberState.UNREVOKED_PARTITIONS and member.pending_revocation
    pending = member.pending_revocation
    c2 = restart(logs, clock)
    loaded = c2.consumer_group(GROUP).members["a"]  # type: ignore[union-attr]
    assert loaded.state is MemberState.UNREVOKED_PARTITIONS and loaded.pending_revocation == pending
    # Its rebalance timeout runs again from the load.
    clock.now += REBALANCE_MS
    c2.timers.run_due(clock.now)
    assert "a" not in c2.consumer_group(GROUP).members  # type: ignore[union-attr]


def test_leaving_members_are_tombstoned() -> None:
    c, logs, clock = make()
    epochs = stable_pair(c)
    c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "b", -1))
    tombstoned = [key for key, value in written(logs, c)[-8:]
                  if isinstance(key, ConsumerGroupKey) and value is None]
    assert [(k.record_type, k.member_id) for k in tombstoned] == [(8, "b"), (7, "b"), (5, "b")]
    c2 = restart(logs, clock)
    assert set(c2.consumer_group(GROUP).members) == {"a"}  # type: ignore[union-attr]
    assert c2.consumer_group(GROUP).group_epoch == epochs["a"] + 1  # type: ignore[union-attr]


def test_a_static_member_that_left_temporarily_comes_back_with_its_partitions() -> None:
    c, logs, clock = make()
    joined = join(c, "s1", instance_id="inst")
    c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "s1", -2, instance_id="inst"))
    current = [v for k, v in written(logs, c) if isinstance(k, ConsumerGroupKey) and k.record_type == 8]
    assert current[-1].member_epoch == -2  # type: ignore[union-attr]
    c2 = restart(logs, clock)
    group = c2.consumer_group(GROUP)
    assert group is not None and group.members["s1"].left_static and group.static_members == {"inst": "s1"}
    back = join(c2, "s2", instance_id="inst")
    assert back.error is ErrorCode.none and back.assignment == joined.assignment
    assert set(group.members) == {"s2"} and group.group_epoch == 1


def test_deleting_the_group_tombstones_it_and_its_offsets() -> None:
    c, logs, clock = make()
    join(c, "a")
    c.commit_offsets(group_id=GROUP, generation_id=1, member_id="a", group_instance_id=None,
                     commits=[OffsetCommit("t", 0, 5)])
    c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "a", -1))
    assert raised(lambda: c.delete_group(GROUP)) is ErrorCode.none
    # One batch: the offset's tombstone, then the (memberless) group's: assignment epoch, the
    # deprecated partition metadata, group epoch.
    tail = written(logs, c)[-4:]
    assert tail[0] == (OffsetKey(GROUP, "t", 0), None)
    assert [(k.record_type, v) for k, v in tail[1:]] == [(6, None), (4, None), (3, None)]  # type: ignore[union-attr]
    c2 = restart(logs, clock)
    assert c2.consumer_group(GROUP) is None and GROUP not in c2.groups
    assert c2.fetch_offsets(GROUP, [("t", 0)])[("t", 0)].offset == -1


def test_offsets_of_unsubscribed_topics_expire_and_an_empty_group_is_deleted() -> None:
    c, logs, clock = make()
    join(c, "a")
    commits = [OffsetCommit("t", 0, 5), OffsetCommit("other", 0, 7)]
    c.commit_offsets(group_id=GROUP, generation_id=1, member_id="a", group_instance_id=None, commits=commits)
    clock.now += RETENTION_MS - 1
    assert c.expire_offsets(clock.now) == 0
    clock.now += 1
    beat(c, "a", 1)  # the member is alive; "other" is not subscribed to
    assert c.expire_offsets(clock.now) == 1
    assert c.fetch_offsets(GROUP, None) == {("t", 0): c.fetch_offsets(GROUP, [("t", 0)])[("t", 0)]}
    assert c.consumer_group(GROUP) is not None
    c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "a", -1))
    # Empty now: its last offset expires (a commit timestamp + retention) and the group goes with it.
    assert c.expire_offsets(clock.now) == 1
    assert c.consumer_group(GROUP) is None and c.fetch_offsets(GROUP, None) == {}
    c2 = restart(logs, clock)
    assert c2.consumer_group(GROUP) is None and GROUP not in c2.groups and c2.fetch_offsets(GROUP, None) == {}


def test_an_empty_group_without_offsets_is_deleted_at_the_next_check() -> None:
    c, _, clock = make()
    join(c, "a")
    assert c.expire_offsets(clock.now) == 0 and c.consumer_group(GROUP) is not None  # has a member
    c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "a", -1))
    c.expire_offsets(clock.now)
    assert c.consumer_group(GROUP) is None


def test_offsets_committed_before_the_group_formed_stay_with_it_after_a_restart() -> None:
    c, logs, clock = make()
    c.commit_offsets(group_id=GROUP, generation_id=-1, member_id="", group_instance_id=None,
                     commits=[OffsetCommit("t", 1, 3)])
    join(c, "a")
    c2 = restart(logs, clock)
    assert c2.consumer_group(GROUP) is not None and GROUP not in c2.groups
    assert c2.fetch_offsets(GROUP, [("t", 1)])[("t", 1)].offset == 3


def test_a_topic_change_while_down_rebalances_at_the_next_heartbeat() -> None:
    c, logs, clock = make()
    a = join(c, "a")
    logs.create_topic("t", 8)  # re-created with more partitions (and a new id) while "down"
    c2 = restart(logs, clock)
    result = beat(c2, "a", a.member_epoch, owned=a.assignment)
    assert result.error is ErrorCode.none and result.member_epoch == 2


def test_a_regex_subscription_writes_its_resolution_and_a_tombstone_when_unused() -> None:
    c, logs, clock = make()
    join(c, "r", topics=(), subscribed_topic_regex="oth.*")
    c.timers.run_due(clock.now)  # the regex is resolved after the heartbeat that brought it
    c.consumer_group_heartbeat(HeartbeatRequest(GROUP, "r", 1, owned={}))
    regexes = [(k, v) for k, v in written(logs, c) if isinstance(k, ConsumerGroupKey) and k.record_type == 16]
    assert [(k.regex, v.topics, v.timestamp) for k, v in regexes] == [  # type: ignore[union-attr]
        ("oth.*", ("other",), clock.now)]
    c2 = restart(logs, clock)
    assert c2.consumer_group(GROUP).members["r"].subscribed_topic_regex == "oth.*"  # type: ignore[union-attr]
    assert c2.consumer_group(GROUP).members["r"].assigned == {"other": frozenset({0, 1})}  # type: ignore[union-attr]
    c2.consumer_group_heartbeat(HeartbeatRequest(GROUP, "r", -1))
    assert (ConsumerGroupKey(16, GROUP, regex="oth.*"), None) in written(logs, c2)
