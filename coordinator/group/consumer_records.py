"""KIP-848 consumer groups in `__consumer_offsets`: the records of each change, their replay, expiry.

Kafka 4.1's GroupMetadataManager appends ConsumerGroup* records for every step of a heartbeat and
rebuilds its groups by replaying them. Here the engine (consumer.py) changes its groups in memory and
then calls `store` (through GroupMetadataManager.store_consumer_group); `store` compares the group with
what was last written for it and appends, as one batch, the records of what changed, in the order
Kafka's consumerGroupHeartbeat writes them:
1. tombstones of the members that are gone: current assignment, target assignment, subscription
   (Kafka's removeMember);
2. member subscriptions that changed (ConsumerGroupMemberMetadata);
3. resolved regular expressions that changed (ConsumerGroupRegularExpression), tombstones of those no
   member uses any more;
4. the group epoch (ConsumerGroupMetadata) when bumped;
5. the target assignment of every member whose target changed, then the assignment epoch;
6. the current assignments that changed (ConsumerGroupCurrentMemberAssignment). A static member that
   left temporarily is written with member epoch -2, as Kafka does.
A deleted group gets Kafka's createGroupTombstoneRecords. An append that fails is logged and leaves the
last-written state alone, so the next change of the group writes everything still missing.

Replay builds the engine's groups back: group and assignment epochs, members with their subscription,
epochs, state, assigned and pending partitions, and targets. Then (`on_loaded`) every member's session
starts over, as Kafka's onLoaded does, so a member heartbeating with its id and epoch goes on.

Differences from Kafka: ConsumerGroupMetadata's MetadataHash is a hash of our own (blake2b over the
subscribed topics' names, ids and partition counts; Kafka's is XXH3 over ids, names, partitions and
racks): both only ask "did the subscribed topics change while the group was not looking". The
resolved regular expressions carry version 0 (Kafka: the metadata image's offset, which a single node
without a metadata log does not have).

Offset expiry (Kafka's OffsetMetadataManager.cleanupExpiredOffsets for a consumer group): an offset of
a topic no member subscribes to expires `offsets.retention.ms` after its commit (or at its v1 expire
timestamp); an Empty group left without offsets is deleted.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, replace
from typing import Any

from minikafka.coordinator.group.consumer import (
    STATIC_LEAVE_EPOCH,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from minikafka.coordinator.group.metadata import GroupMetadataManager, Records
from minikafka.coordinator.group.records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
    CONSUMER_GROUP_MEMBER_METADATA,
    CONSUMER_GROUP_METADATA,
    CONSUMER_GROUP_PARTITION_METADATA,
    CONSUMER_GROUP_REGULAR_EXPRESSION,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupValue,
    OffsetKey,
    TopicIdPartitions,
    decode_consumer_group_value,
    encode_consumer_group_key,
    encode_consumer_group_value,
    encode_offset_key,
)
from minikafka.coordinator.ports import LogManager
from minikafka.protocol.errors import KafkaError

_log = logging.getLogger("minikafka.coordinator.group")

# Kafka's MemberState values (modern/MemberState.java).
_STATE_VALUES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {value: state for state, value in _STATE_VALUES.items()}


@dataclass(frozen=True, slots=True)
class _Written:
    """What the records last written for one group replay to."""

    epoch: ConsumerGroupMetadataValue
    assignment_epoch: int
    subscriptions: dict[str, ConsumerGroupMemberMetadataValue]
    targets: dict[str, TopicIdPartitions]
    current: dict[str, ConsumerGroupCurrentMemberAssignmentValue]
    regexes: dict[str, tuple[str, ...]]


def metadata_hash(group: ConsumerGroup, logs: LogManager) -> int:
    """A stand-in for Kafka's MetadataHash over the topics the target was computed from; never 0
    (Kafka's "no hash")."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(group.subscribed_metadata):
        meta = logs.topic(name)
        topic_id = "" if meta is None else str(meta.topic_id)
        digest.update(f"{name}\0{topic_id}\0{group.subscribed_metadata[name]}\0".encode())
    return int.from_bytes(digest.digest(), "big", signed=True) or 1


def _regex_matches(pattern: str, topic: str) -> bool:
    try:
        return re.fullmatch(pattern, topic) is not None
    except re.error:
        return False


class ConsumerGroupRecords:
    """The engine's groups (`groups`, the engine's own map) as `__consumer_offsets` records."""

    def __init__(self, manager: GroupMetadataManager, logs: LogManager, groups: dict[str, ConsumerGroup]) -> None:
        self._manager = manager
        self._logs = logs
        self._groups = groups
        self._written: dict[str, _Written] = {}
        # The group as it was last written, in the engine's own terms: comparing it is much cheaper than
        # building the records' values, and most heartbeats change nothing.
        self._unchanged: dict[str, tuple[Any, ...]] = {}
        self._replayed_hash: dict[str, int] = {}
        # Records that must go first in the group's next batch (a conversion's tombstone of the classic
        # group), so the conversion and the group's first records are appended together.
        self._prefix: dict[str, Records] = {}

    # -- topic ids -----------------------------------------------------------------------------

    def _by_id(self, assignment: Assignment) -> TopicIdPartitions:
        out = []
        for topic, partitions in assignment.items():
            meta = self._logs.topic(topic)
            if meta is not None and partitions:  # a deleted topic has no id left to write
                out.append((meta.topic_id, tuple(sorted(partitions))))
        out.sort()
        return tuple(out)

    def _by_name(self, partitions: TopicIdPartitions) -> Assignment:
        out = {}
        for topic_id, parts in partitions:
            meta = self._logs.topic_by_id(topic_id)
            if meta is not None and parts:  # the topic was deleted since
                out[meta.name] = frozenset(parts)
        return out

    # -- writing -------------------------------------------------------------------------------

    @staticmethod
    def _state(group: ConsumerGroup) -> tuple[Any, ...]:
        """Everything the records carry, copied (the engine may change its dicts in place)."""
        return (
            group.group_epoch, group.assignment_epoch, dict(group.subscribed_metadata),
            {member_id: dict(target) for member_id, target in group.target.items()},
            [(m.member_id, m.instance_id, m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names,
              m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor, m.member_epoch,
              m.previous_member_epoch, m.state, m.left_static, dict(m.assigned), dict(m.pending_revocation),
              m.classic)
             for m in group.members.values()],
        )

    def _snapshot(self, group: ConsumerGroup) -> _Written:
        subscriptions, targets, current = {}, {}, {}
        for member_id, m in group.members.items():
            subscriptions[member_id] = ConsumerGroupMemberMetadataValue(
                m.instance_id, m.rack_id, m.client_id, m.client_host, tuple(sorted(m.subscribed_topic_names)),
                m.subscribed_topic_regex, m.rebalance_timeout_ms, m.server_assignor,
                None if m.classic is None else m.classic.protocols,
                0 if m.classic is None else m.classic.session_timeout_ms,
            )
            targets[member_id] = self._by_id(group.target.get(member_id, {}))
            current[member_id] = ConsumerGroupCurrentMemberAssignmentValue(
                STATIC_LEAVE_EPOCH if m.left_static else m.member_epoch,
                m.previous_member_epoch,
                _STATE_VALUES[m.state],
                self._by_id(m.assigned),
                # Kafka's static leave drops the pending revocation along with the epoch.
                () if m.left_static else self._by_id(m.pending_revocation),
            )
        regexes = {
            regex: tuple(sorted(t for t in group.subscribed_metadata if _regex_matches(regex, t)))
            for regex in {m.subscribed_topic_regex for m in group.members.values()
                          if m.subscribed_topic_regex and not m.regex_pending}
        }
        return _Written(ConsumerGroupMetadataValue(group.group_epoch, metadata_hash(group, self._logs)),
                        group.assignment_epoch, subscriptions, targets, current, regexes)

    def _record(self, record_type: int, group_id: str, value: ConsumerGroupValue | None, *,
                member_id: str | None = None, regex: str | None = None) -> tuple[bytes, bytes | None]:
        key = encode_consumer_group_key(ConsumerGroupKey(record_type, group_id, member_id, regex))
        return key, None if value is None else encode_consumer_group_value(value)

    def _changes(self, group_id: str, old: _Written | None, new: _Written) -> Records:
        g = group_id
        before = old or _Written(ConsumerGroupMetadataValue(-1), -1, {}, {}, {}, {})
        records: Records = []
        gone = [m for m in before.subscriptions if m not in new.subscriptions]
        for member_id in gone:
            records.append(self._record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, g, None, member_id=member_id))
            records.append(self._record(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, g, None, member_id=member_id))
            records.append(self._record(CONSUMER_GROUP_MEMBER_METADATA, g, None, member_id=member_id))
        for member_id, value in new.subscriptions.items():
            if before.subscriptions.get(member_id) != value:
                records.append(self._record(CONSUMER_GROUP_MEMBER_METADATA, g, value, member_id=member_id))
        now = self._manager.now()
        for regex, topics in new.regexes.items():
            if before.regexes.get(regex) != topics:
                resolved = ConsumerGroupRegularExpressionValue(topics, 0, now)
                records.append(self._record(CONSUMER_GROUP_REGULAR_EXPRESSION, g, resolved, regex=regex))
        for regex in before.regexes.keys() - new.regexes.keys():
            records.append(self._record(CONSUMER_GROUP_REGULAR_EXPRESSION, g, None, regex=regex))
        if before.epoch != new.epoch:
            records.append(self._record(CONSUMER_GROUP_METADATA, g, new.epoch))
        for member_id, target in new.targets.items():
            if before.targets.get(member_id) != target:
                records.append(self._record(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, g,
                                            ConsumerGroupTargetAssignmentMemberValue(target), member_id=member_id))
        if before.assignment_epoch != new.assignment_epoch:
            records.append(self._record(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, g,
                                        ConsumerGroupTargetAssignmentMetadataValue(new.assignment_epoch)))
        for member_id, current in new.current.items():
            if before.current.get(member_id) != current:
                records.append(self._record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, g, current, member_id=member_id))
        return records

    def prepend(self, group_id: str, records: Records) -> None:
        """Write `records` at the head of the group's next batch."""
        self._prefix.setdefault(group_id, []).extend(records)

    def store(self, group: ConsumerGroup) -> None:
        """Append the records of what changed in `group` since it was last written."""
        state = self._state(group)
        if self._unchanged.get(group.group_id) == state and group.group_id not in self._prefix:
            return
        new = self._snapshot(group)
        prefix = self._prefix.pop(group.group_id, [])
        records = prefix + self._changes(group.group_id, self._written.get(group.group_id), new)
        if records:
            try:
                self._manager.append(group.group_id, records)
            except KafkaError as exc:
                # Kafka fails the heartbeat instead; the member's view here already moved on, so the
                # records are written with the group's next change (nothing is marked written).
                _log.warning("failed to write the records of consumer group %s: %s", group.group_id, exc)
                if prefix:
                    self._prefix[group.group_id] = prefix
                return
        self._written[group.group_id] = new
        self._unchanged[group.group_id] = state

    def tombstones(self, group_id: str) -> Records:
        """Kafka's ConsumerGroup.createGroupTombstoneRecords for what was written of the group; the
        group counts as never written afterwards."""
        written = self._written.pop(group_id, None)
        self._unchanged.pop(group_id, None)
        # A conversion's records not written yet still go first.
        records: Records = self._prefix.pop(group_id, [])
        members = list(written.subscriptions) if written else []
        regexes = list(written.regexes) if written else []
        g = group_id
        records += [self._record(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, g, None, member_id=m)
                    for m in members]
        records += [self._record(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, g, None, member_id=m) for m in members]
        records.append(self._record(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, g, None))
        records += [self._record(CONSUMER_GROUP_MEMBER_METADATA, g, None, member_id=m) for m in members]
        records += [self._record(CONSUMER_GROUP_REGULAR_EXPRESSION, g, None, regex=r) for r in regexes]
        records.append(self._record(CONSUMER_GROUP_PARTITION_METADATA, g, None))
        records.append(self._record(CONSUMER_GROUP_METADATA, g, None))
        return records

    # -- replay --------------------------------------------------------------------------------

    def has_group(self, group_id: str) -> bool:
        return group_id in self._groups

    def forget(self, group_id: str) -> None:
        """A classic group record replaced the group (a conversion back to classic)."""
        self._groups.pop(group_id, None)
        self._written.pop(group_id, None)
        self._unchanged.pop(group_id, None)
        self._replayed_hash.pop(group_id, None)

    def _group(self, group_id: str) -> ConsumerGroup:
        group = self._groups.get(group_id)
        if group is None:
            # Kafka's getOrMaybeCreatePersistedConsumerGroup: a classic group created only to hold
            # offsets has no records of its own and gives way (its offsets stay).
            classic = self._manager.groups.pop(group_id, None)
            if classic is not None and classic.members:
                _log.warning("consumer group records replace classic group %s with members", group_id)
            group = self._groups[group_id] = ConsumerGroup(group_id)
        return group

    @staticmethod
    def _member(group: ConsumerGroup, member_id: str) -> ConsumerMember:
        member = group.members.get(member_id)
        if member is None:
            member = group.members[member_id] = ConsumerMember(member_id)
        return member

    def replay(self, key: ConsumerGroupKey, value: bytes | None) -> None:
        """Apply one KIP-848 record (a tombstone when `value` is None) to the groups."""
        kind, group_id, member_id = key.record_type, key.group, key.member_id or ""
        if kind in (CONSUMER_GROUP_PARTITION_METADATA, CONSUMER_GROUP_REGULAR_EXPRESSION):
            return  # 4.1 no longer reads the former; the engine resolves regexes from the topics itself
        if value is None:
            self._replay_tombstone(kind, group_id, member_id)
            return
        decoded = decode_consumer_group_value(kind, value)
        group = self._group(group_id)
        if isinstance(decoded, ConsumerGroupMetadataValue):
            group.group_epoch = decoded.epoch
            self._replayed_hash[group_id] = decoded.metadata_hash
        elif isinstance(decoded, ConsumerGroupTargetAssignmentMetadataValue):
            group.assignment_epoch = decoded.assignment_epoch
        elif isinstance(decoded, ConsumerGroupTargetAssignmentMemberValue):
            group.target[member_id] = self._by_name(decoded.topic_partitions)
        elif isinstance(decoded, ConsumerGroupMemberMetadataValue):
            member = self._member(group, member_id)
            member.instance_id = decoded.instance_id
            member.rack_id = decoded.rack_id
            member.client_id = decoded.client_id
            member.client_host = decoded.client_host
            member.subscribed_topic_names = decoded.subscribed_topic_names
            member.subscribed_topic_regex = decoded.subscribed_topic_regex
            member.rebalance_timeout_ms = decoded.rebalance_timeout_ms
            member.server_assignor = decoded.server_assignor
            member.classic = None if decoded.classic_protocols is None else ClassicMemberMetadata(
                decoded.classic_session_timeout_ms, decoded.classic_protocols)
        elif isinstance(decoded, ConsumerGroupCurrentMemberAssignmentValue):
            member = self._member(group, member_id)
            member.left_static = decoded.member_epoch == STATIC_LEAVE_EPOCH
            member.member_epoch = decoded.member_epoch
            member.previous_member_epoch = decoded.previous_member_epoch
            member.state = _STATES.get(decoded.state, MemberState.STABLE)
            member.assigned = self._by_name(decoded.assigned_partitions)
            member.pending_revocation = self._by_name(decoded.partitions_pending_revocation)

    def _replay_tombstone(self, kind: int, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is None:
            return
        if kind == CONSUMER_GROUP_METADATA:
            self.forget(group_id)
        elif kind == CONSUMER_GROUP_MEMBER_METADATA:
            group.members.pop(member_id, None)
        elif kind == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
            group.target.pop(member_id, None)
        elif kind == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT and member_id in group.members:
            member = group.members[member_id]
            member.assigned, member.pending_revocation = {}, {}

    def on_loaded(self) -> None:
        """After the replay and the engine's own on_loaded (which read the subscribed topics again):
        a group whose topics changed since its epoch was written rebalances at the next heartbeat, as a
        MetadataHash mismatch does in Kafka; what was replayed counts as written."""
        for group_id, group in self._groups.items():
            for member in group.members.values():
                if member.instance_id is not None:
                    group.static_members[member.instance_id] = member.member_id
            replayed_hash = self._replayed_hash.get(group_id, 0)
            snapshot = self._snapshot(group)
            if snapshot.epoch.metadata_hash != replayed_hash:
                group.subscribed_metadata = {}  # unlike any real metadata: the next heartbeat bumps the epoch
            self._written[group_id] = replace(snapshot, epoch=ConsumerGroupMetadataValue(group.group_epoch,
                                                                                         replayed_hash))
        self._replayed_hash.clear()

    # -- expiry --------------------------------------------------------------------------------

    def expire_offsets(self, now_ms: int) -> int:
        """Kafka's cleanupExpiredOffsets and maybeDeleteGroup for every consumer group; returns the
        number of offsets removed."""
        removed = 0
        offsets = self._manager.offsets
        retention_ms = self._manager.config.offsets_retention_ms
        for group_id, group in list(self._groups.items()):
            expired = [tp for tp in offsets.expired(group_id, now_ms, retention_ms, None)
                       if not any(m.subscribes_to(tp[0]) for m in group.members.values())]
            all_expired = len(expired) == len(offsets.partitions(group_id)) and not offsets.has_pending(group_id)
            delete = all_expired and not group.members
            records: Records = [(encode_offset_key(OffsetKey(group_id, t, p)), None) for t, p in expired]
            written = self._written.get(group_id)
            if delete:
                records += self.tombstones(group_id)
            if not records:
                continue
            try:
                self._manager.append(group_id, records)
            except KafkaError as exc:
                # As Kafka's cleanupGroupMetadata: logged, nothing removed, the next check retries.
                if written is not None:
                    self._written[group_id] = written
                _log.warning("failed to write tombstones for consumer group %s: %s", group_id, exc)
                continue
            for tp in expired:
                offsets.delete(group_id, tp)
            removed += len(expired)
            if delete:
                del self._groups[group_id]
        return removed
