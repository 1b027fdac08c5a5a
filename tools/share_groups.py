"""Share groups (KIP-932) in `minikafka consumer-groups --describe`: what Kafka's kafka-share-groups.sh
(ShareGroupCommand) prints for a share group, over ShareGroupDescribe and DescribeShareGroupOffsets.

--describe (the offsets: GROUP TOPIC PARTITION START-OFFSET LAG, LEADER-EPOCH with --verbose),
--describe --members (GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT, MEMBER-EPOCH with
--verbose) and --describe --state (GROUP COORDINATOR (ID) STATE #MEMBERS, GROUP-EPOCH and
ASSIGNMENT-EPOCH with --verbose), in ShareGroupCommand's column formats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.tools.admin_client import COORDINATOR_KEY_GROUP, AdminClient, AdminError, Node, check

MISSING = "-"


@dataclass(frozen=True, slots=True)
class ShareMember:
    member_id: str
    host: str
    client_id: str
    member_epoch: int
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ShareGroup:
    group_id: str
    coordinator: Node
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMember, ...]


def describe_share_group(client: AdminClient, group_id: str) -> ShareGroup | None:
    """The share group `group_id`; None when the broker has no share groups or the id is not one."""
    node, connection = client.coordinator(group_id, COORDINATOR_KEY_GROUP)
    try:
        body = connection.request(ApiKey.SHARE_GROUP_DESCRIBE, group_ids=[group_id],
                                  include_authorized_operations=False)
    except AdminError as exc:
        if exc.code == ErrorCode.unsupported_version:
            return None
        raise
    group = body.groups[0]
    if group.error_code == ErrorCode.group_id_not_found:
        return None
    check(group.error_code, f"ShareGroupDescribe {group_id}")
    members = tuple(ShareMember(m.member_id, m.client_host, m.client_id, m.member_epoch, _assigned(m))
                    for m in group.members)
    return ShareGroup(group_id, node, group.group_state, group.group_epoch, group.assignment_epoch, members)


def _assigned(member: Any) -> tuple[tuple[str, int], ...]:
    return tuple((tp.topic_name, p) for tp in member.assignment.topic_partitions for p in tp.partitions)


def _offsets(client: AdminClient, group: ShareGroup) -> list[tuple[str, int, str, str, str]]:
    """(topic, partition, leader epoch, start offset, lag) of every share-partition of the group."""
    _node, connection = client.coordinator(group.group_id, COORDINATOR_KEY_GROUP)
    body = connection.request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, groups=[{"group_id": group.group_id,
                                                                            "topics": None}])
    answer = body.groups[0]
    check(answer.error_code, f"DescribeShareGroupOffsets {group.group_id}")
    rows = []
    for topic in answer.topics:
        for p in topic.partitions:
            known = p.start_offset >= 0
            rows.append((topic.topic_name, p.partition_index, str(p.leader_epoch) if known else MISSING,
                         str(p.start_offset) if known else MISSING,
                         str(getattr(p, "lag", -1)) if known and getattr(p, "lag", -1) >= 0 else MISSING))
    return sorted(rows, key=lambda row: (row[0], row[1]))


def _printable(group: ShareGroup, rows: int, err: TextIO) -> bool:
    """ShareGroupCommand.maybePrintEmptyGroupState."""
    if group.state == "Empty":
        err.write(f"\nShare group '{group.group_id}' has no active members.\n")
    return rows > 0


def print_offsets(client: AdminClient, group: ShareGroup, verbose: bool, out: TextIO) -> None:
    rows = _offsets(client, group)
    if not rows:
        out.write(f"\nShare group '{group.group_id}' has no offset information.\n")
        return
    g = max(15, len(group.group_id))
    t = max([15, *(len(row[0]) for row in rows)])

    def line(cells: tuple[str, str, str, str, str, str]) -> str:
        group_id, topic, partition, epoch, offset, lag = cells
        middle = f"{epoch:<13} " if verbose else ""
        return f"\n{group_id:<{g}} {topic:<{t}} {partition:<10} {middle}{offset:<13} {lag}"

    header = ("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG")
    body = [(group.group_id, topic, str(partition), epoch, offset, lag)
            for topic, partition, epoch, offset, lag in rows]
    out.write("".join(line(cells) for cells in (header, *body)) + "\n")


def _assignment_text(tps: tuple[tuple[str, int], ...]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(sorted(f"{topic}:" + ",".join(str(p) for p in sorted(ps)) for topic, ps in by_topic.items()))


def print_members(group: ShareGroup, verbose: bool, out: TextIO, err: TextIO) -> None:
    if not _printable(group, len(group.members), err):
        return
    members = sorted(group.members, key=lambda m: m.member_id)
    g = max(15, len(group.group_id))
    c = max([15, *(len(m.member_id) for m in members)])
    h = max([15, *(len(m.host) for m in members)])
    k = max([15, *(len(m.client_id) for m in members)])

    def line(member_id: str, host: str, client_id: str, count: str, epoch: str, assignment: str,
             group_id: str) -> str:
        middle = f"{epoch:<13} " if verbose else ""
        return f"\n{group_id:<{g}} {member_id:<{c}} {host:<{h}} {client_id:<{k}} {count:<12} {middle}{assignment}"

    text = line("CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT", "GROUP")
    for m in members:
        text += line(m.member_id, m.host, m.client_id, str(len(m.assignment)), str(m.member_epoch),
                     _assignment_text(m.assignment), group.group_id)
    out.write(text + "\n")


def print_state(group: ShareGroup, verbose: bool, out: TextIO, err: TextIO) -> None:
    _printable(group, 1, err)
    coordinator = f"{group.coordinator.host}:{group.coordinator.port}  ({group.coordinator.node_id})"
    g = max(15, len(group.group_id))
    c = max(25, len(coordinator))
    if verbose:
        rows = [("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"),
                (group.group_id, coordinator, group.state, str(group.group_epoch), str(group.assignment_epoch),
                 str(len(group.members)))]
        out.write("".join(f"\n{r[0]:<{g}} {r[1]:<{c}} {r[2]:<15} {r[3]:<12} {r[4]:<17} {r[5]}" for r in rows) + "\n")
    else:
        rows4 = [("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"),
                 (group.group_id, coordinator, group.state, str(len(group.members)))]
        out.write("".join(f"\n{r[0]:<{g}} {r[1]:<{c}} {r[2]:<15} {r[3]}" for r in rows4) + "\n")
