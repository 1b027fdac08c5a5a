"""GroupMigration: non-empty groups between the classic protocol and the KIP-848 consumer protocol.

Follows Kafka 4.1's GroupMetadataManager (the "online migration" of KIP-848):
- Upgrade (validateOnlineUpgrade / convertToConsumerGroup): a ConsumerGroupHeartbeat joining a
  classic group with members converts it, if `group.consumer.migration.policy` allows upgrades and
  the group's protocol type is "consumer"; otherwise GROUP_ID_NOT_FOUND with Kafka's message. Members
  waiting in JoinGroup/SyncGroup are told REBALANCE_IN_PROGRESS; every classic member becomes a
  consumer-group member at the classic generation (its epoch; the group and assignment epochs too),
  with its last assignment as current and target assignment and ClassicMemberMetadata (session
  timeout, protocols) recorded (ConsumerGroup.fromClassicGroup). The classic group's record is
  tombstoned in the same batch as the consumer group's first records. The joining member then bumps
  the group epoch and the server-side assignor rebalances the group.
- Classic members inside a consumer group (classicGroupJoin/Sync/Heartbeat/LeaveToConsumerGroup):
  JoinGroup updates the member from its embedded subscription (topics, owned partitions, rack) and
  reconciles it, answering at once with its member epoch as the generation, protocol type
  "consumer", its first protocol and no leader (so no client assigns); SyncGroup hands out the
  member's current assignment (ConsumerProtocolAssignment in its subscription's version) unless a
  newer group epoch means it must rejoin first (REBALANCE_IN_PROGRESS); Heartbeat answers
  REBALANCE_IN_PROGRESS when the member is behind the group epoch, must revoke partitions, or can now
  get partitions others released. A member that does not rejoin (join timeout) or sync (sync timeout)
  within its rebalance timeout is fenced; its session is its own session timeout.
- Downgrade (validateOnlineDowngradeWithFencedMembers / convertToClassicGroup): when the last
  consumer-protocol members leave or are fenced and the others are all classic members, the policy
  allowing downgrades, the consumer group's records are tombstoned and a Stable classic group takes
  its place at the group epoch (each member's target assignment as its classic assignment,
  ClassicGroup.fromConsumerGroup), written in the same batch; then it rebalances.
Not done: the group size limits (group.consumer.max.size, group.classic.max.size: no limits here),
and the downgrade Kafka does when a classic static member replaces the last consumer-protocol one.
"""

from __future__ import annotations

import logging
import uuid

from minikafka.coordinator.errors import (
    FencedInstanceId,
    GroupError,
    IllegalGeneration,
    RebalanceInProgress,
    UnknownMemberId,
)
from minikafka.coordinator.group.classic import ClassicGroupEngine, JoinGroupRequest, SyncGroupRequest
from minikafka.coordinator.group.consumer import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupEngine,
    ConsumerMember,
    MemberState,
)
from minikafka.coordinator.group.consumer_protocol import (
    MalformedConsumerProtocol,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    subscription_version,
)
from minikafka.coordinator.group.consumer_records import ConsumerGroupRecords
from minikafka.coordinator.group.metadata import GroupMetadataManager, group_record
from minikafka.coordinator.group.records import CONSUMER_PROTOCOL_TYPE, GroupKey, encode_group_key
from minikafka.coordinator.group.state import Group, GroupState, JoinResult, Member, SyncResult
from minikafka.coordinator.ports import LogManager
from minikafka.protocol.errors import ErrorCode, KafkaError

_log = logging.getLogger("minikafka.coordinator.group")

POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


class GroupMigration:
    def __init__(self, manager: GroupMetadataManager, logs: LogManager, classic: ClassicGroupEngine,
                 consumer: ConsumerGroupEngine, records: ConsumerGroupRecords, policy: str) -> None:
        if policy not in POLICIES:
            raise ValueError(f"group.consumer.migration.policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        self._manager = manager
        self._logs = logs
        self._classic = classic
        self._consumer = consumer
        self._records = records
        self.policy = policy

    def upgrade_enabled(self) -> bool:
        return self.policy in ("upgrade", "bidirectional")

    def downgrade_enabled(self) -> bool:
        return self.policy in ("downgrade", "bidirectional")

    # -- classic -> consumer -------------------------------------------------------------------

    def upgrade(self, group_id: str) -> ConsumerGroup | str:
        """The classic group as a consumer group (now in the engine's map), or why it cannot be."""
        classic = self._manager.groups[group_id]
        prefix = f"Cannot upgrade classic group {group_id} to consumer group because"
        if not self.upgrade_enabled():
            _log.info("%s online upgrade is disabled", prefix)
            return f"{prefix} online upgrade is disabled."
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            _log.info("%s the group does not use the consumer embedded protocol", prefix)
            return f"{prefix} the group does not use the consumer embedded protocol."
        try:
            group = self._from_classic(classic)
        except (MalformedConsumerProtocol, KeyError) as exc:
            _log.warning("%s the embedded consumer protocol is malformed: %s", prefix, exc)
            return f"{prefix} the embedded consumer protocol is malformed."
        timers = self._manager.timers
        for member in classic.members.values():
            member.complete_join(JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
            member.complete_sync(SyncResult(ErrorCode.rebalance_in_progress))
            timers.cancel(("heartbeat", group_id, member.member_id))
        for pending in classic.pending_members:
            timers.cancel(("heartbeat", group_id, pending))
        timers.cancel(("join", group_id))
        del self._manager.groups[group_id]
        self._consumer.groups[group_id] = group
        self._records.prepend(group_id, [(encode_group_key(GroupKey(group_id)), None)])
        for converted in group.members.values():
            self._consumer.schedule_session(group, converted)
        _log.info("converted classic group %s (generation %d, %d members) to a consumer group", group_id,
                  classic.generation_id, len(group.members))
        return group

    def _from_classic(self, classic: Group) -> ConsumerGroup:
        """Kafka's ConsumerGroup.fromClassicGroup."""
        generation = classic.generation_id
        group = ConsumerGroup(classic.group_id, group_epoch=generation, assignment_epoch=generation)
        for m in classic.members.values():
            protocol = classic.protocol_name or m.protocols[0][0]
            subscription = decode_subscription(m.metadata(protocol))
            assigned = self._known_topics(decode_assignment(m.assignment))
            member = ConsumerMember(
                m.member_id,
                instance_id=m.group_instance_id,
                rack_id=subscription.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                member_epoch=generation,
                previous_member_epoch=generation,
                assigned=assigned,
                classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
            )
            group.members[member.member_id] = member
            group.target[member.member_id] = dict(assigned)
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        return group

    def _known_topics(self, partitions: dict[str, frozenset[int]]) -> dict[str, frozenset[int]]:
        """Only partitions of topics that exist (Kafka keeps partitions by topic id)."""
        out = {}
        for topic, parts in partitions.items():
            meta = self._logs.topic(topic)
            if meta is not None:
                kept = frozenset(p for p in parts if 0 <= p < meta.partitions)
                if kept:
                    out[topic] = kept
        return out

    # -- consumer -> classic -------------------------------------------------------------------

    def downgrade(self, group: ConsumerGroup, leaving: list[str]) -> bool:
        """Replace the consumer group by a classic one without the leaving members, if it may be."""
        group_id = group.group_id
        if not group.all_classic_except(leaving):
            return False
        if len(group.members) - len(set(leaving)) <= 0:
            return False  # an empty consumer group stays one (a JoinGroup replaces it, as before)
        if not self.downgrade_enabled():
            _log.info("cannot downgrade consumer group %s to a classic group: online downgrade is disabled",
                      group_id)
            return False
        try:
            classic = self._to_classic(group, set(leaving))
        except (MalformedConsumerProtocol, KafkaError, KeyError) as exc:
            _log.warning("cannot downgrade consumer group %s: %s", group_id, exc)
            return False
        try:
            self._manager.append(group_id, [*self._records.tombstones(group_id), group_record(classic)])
        except KafkaError as exc:
            # Nothing changed in memory: the members are removed as without a downgrade (the records
            # of the consumer group are all written again with its next change).
            _log.warning("failed to write the downgrade of consumer group %s: %s", group_id, exc)
            return False
        for member_id in group.members:
            self._consumer.cancel_timers(group_id, member_id)
        del self._consumer.groups[group_id]
        self._manager.groups[group_id] = classic
        for member in classic.members.values():
            self._classic.reschedule_heartbeat(classic, member)
        _log.info("converted consumer group %s (epoch %d) to a classic group", group_id, group.group_epoch)
        self._classic.prepare_rebalance(classic, f"Downgrade group {group_id} from consumer to classic "
                                                 f"for member leaving.")
        return True

    def _to_classic(self, group: ConsumerGroup, leaving: set[str]) -> Group:
        """Kafka's ClassicGroup.fromConsumerGroup: Stable at the group epoch."""
        now = self._manager.now()
        classic = Group(group.group_id, state=GroupState.STABLE, state_timestamp_ms=now,
                        protocol_type=CONSUMER_PROTOCOL_TYPE, generation_id=group.group_epoch)
        for m in group.members.values():
            if m.member_id in leaving or m.classic is None:
                continue
            classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                               m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols)))
        classic.protocol_type = CONSUMER_PROTOCOL_TYPE
        classic.protocol_name = classic.select_protocol()
        for member in classic.members.values():
            version = subscription_version(member.metadata(classic.protocol_name))
            member.assignment = encode_assignment(group.target.get(member.member_id, {}), version)
        return classic

    # -- classic members of a consumer group ---------------------------------------------------

    def join(self, group: ConsumerGroup, request: JoinGroupRequest) -> JoinResult:
        """Kafka's classicGroupJoinToConsumerGroup: answered at once, no join phase to wait for."""
        config = self._manager.config
        if not config.min_session_timeout_ms <= request.session_timeout_ms <= config.max_session_timeout_ms:
            return JoinResult(ErrorCode.invalid_session_timeout, request.member_id)
        unknown = not request.member_id
        member_id = str(uuid.uuid4()) if unknown else request.member_id
        if not group.supports_classic_protocols(request.protocol_type, request.protocol_names()):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        if unknown and request.require_known_member_id and request.group_instance_id is None:
            return JoinResult(ErrorCode.member_id_required, member_id)
        try:
            subscription = decode_subscription(request.protocols[0][1])
        except MalformedConsumerProtocol:
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        try:
            member = self._join_member(group, request, member_id, unknown)
        except GroupError as exc:
            return JoinResult(exc.error_code, member_id)
        names = tuple(sorted(set(subscription.topics)))
        # A new member (no classic metadata yet) or a changed subscription starts a rebalance; a static
        # member taking over its instance does not.
        bump = member.classic is None or names != member.subscribed_topic_names
        group.members[member.member_id] = member
        member.instance_id = request.group_instance_id or member.instance_id
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        member.rack_id = subscription.rack_id
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.client_id, member.client_host = request.client_id, request.client_host
        member.subscribed_topic_names = names
        member.classic = ClassicMemberMetadata(request.session_timeout_ms, tuple(request.protocols))
        self._consumer.update_and_reconcile(group, member, bump, self._known_topics(subscription.owned))
        timers = self._manager.timers
        timers.cancel(("consumer-join", group.group_id, member.member_id))
        self._consumer.schedule_session(group, member)
        self._consumer.schedule_fence("consumer-sync", group, member, request.rebalance_timeout_ms)
        self._manager.store_consumer_group(group)
        return JoinResult(ErrorCode.none, member.member_id, member.member_epoch, CONSUMER_PROTOCOL_TYPE,
                          member.classic.protocol_name(), "")

    def _join_member(self, group: ConsumerGroup, request: JoinGroupRequest, member_id: str,
                     unknown: bool) -> ConsumerMember:
        """The joining member: known, new, or (static) taking over its instance's member."""
        instance_id = request.group_instance_id
        old_id = group.static_members.get(instance_id) if instance_id is not None else None
        old = group.members.get(old_id) if old_id is not None else None
        if old is not None:
            if old.member_id == member_id:
                return _classic_member(group, old)
            if not unknown:
                raise FencedInstanceId(f"static member {instance_id} of group {group.group_id} is {old.member_id}")
            # A static member restarting under a new member id takes over partitions and epoch
            # (Kafka's static member replacement), without a rebalance.
            del group.members[old.member_id]
            self._consumer.cancel_timers(group.group_id, old.member_id)
            group.target[member_id] = group.target.pop(old.member_id, {})
            old.member_id, old.left_static = member_id, False
            return old
        member = group.members.get(member_id)
        if member is None:
            return ConsumerMember(member_id)
        return _classic_member(group, member)

    def _member(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember and throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            known = group.static_members.get(instance_id)
            member = group.members.get(known) if known is not None else None
            if member is not None and member.member_id != member_id:
                raise FencedInstanceId(f"static member {instance_id} of group {group.group_id} is {member.member_id}")
        if member is None:
            raise UnknownMemberId(f"member {member_id} is not in consumer group {group.group_id}")
        return _classic_member(group, member)

    def sync(self, group: ConsumerGroup, request: SyncGroupRequest) -> SyncResult:
        """Kafka's classicGroupSyncToConsumerGroup."""
        try:
            member = self._member(group, request.member_id, request.group_instance_id)
        except GroupError as exc:
            return SyncResult(exc.error_code)
        assert member.classic is not None
        if request.generation_id != member.member_epoch:
            return SyncResult(ErrorCode.illegal_generation)
        if (request.protocol_type is not None and request.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            request.protocol_name is not None and request.protocol_name != member.classic.protocol_name()
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            # A rebalance started since the member joined: it must rejoin to catch up.
            self._consumer.schedule_fence("consumer-join", group, member, member.rebalance_timeout_ms,
                                          if_absent=True)
            return SyncResult(ErrorCode.rebalance_in_progress)
        self._manager.timers.cancel(("consumer-sync", group.group_id, member.member_id))
        self._consumer.schedule_session(group, member)
        try:
            version = subscription_version(member.classic.protocols[0][1])
        except MalformedConsumerProtocol:
            version = 0
        return SyncResult(ErrorCode.none, encode_assignment(member.assigned, version), request.protocol_type,
                          request.protocol_name)

    def heartbeat(self, group: ConsumerGroup, generation_id: int, member_id: str,
                  instance_id: str | None) -> None:
        """Kafka's classicGroupHeartbeatToConsumerGroup."""
        member = self._member(group, member_id, instance_id)
        if generation_id != member.member_epoch:
            raise IllegalGeneration(f"generation {generation_id} is not {member.member_epoch}")
        self._consumer.schedule_session(group, member)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member))
        ):
            self._consumer.schedule_fence("consumer-join", group, member, member.rebalance_timeout_ms,
                                          if_absent=True)
            raise RebalanceInProgress(f"consumer group {group.group_id} is rebalancing")

    def leave(self, group: ConsumerGroup, members: list[tuple[str, str | None]]) -> list[GroupError | None]:
        """Kafka's classicGroupLeaveToConsumerGroup: per member, None when it left, else why it could not;
        the others leave together."""
        errors: list[GroupError | None] = []
        leaving: list[str] = []
        for member_id, instance_id in members:
            if instance_id is None:
                member = group.members.get(member_id)
            else:
                known = group.static_members.get(instance_id)
                member = group.members.get(known) if known is not None else None
                if member is not None and member_id and member.member_id != member_id:
                    errors.append(FencedInstanceId(f"static member {instance_id} is {member.member_id}"))
                    continue
            if member is None or member.classic is None:
                errors.append(UnknownMemberId(f"member {member_id} is no classic member of {group.group_id}"))
                continue
            _log.info("classic member %s left consumer group %s", member.member_id, group.group_id)
            leaving.append(member.member_id)
            errors.append(None)
        if leaving:
            self._consumer.remove_members(group, leaving)
        return errors


def _classic_member(group: ConsumerGroup, member: ConsumerMember) -> ConsumerMember:
    """Kafka's throwIfMemberDoesNotUseClassicProtocol."""
    if member.classic is None:
        raise UnknownMemberId(f"member {member.member_id} of group {group.group_id} uses the consumer protocol")
    return member
