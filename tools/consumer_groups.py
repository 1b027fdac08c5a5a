"""`minikafka consumer-groups`: Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand) without a JVM,
over the wire protocol, so it works against minikafka and Apache Kafka alike.

Actions, options, tables and messages follow ConsumerGroupCommand and GroupOffsetsResetter: --list,
--describe (offsets, --members, --state), --reset-offsets, --delete and --delete-offsets, for classic
consumer groups (DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups, OffsetDelete).
A share group (KIP-932) is described as kafka-share-groups.sh describes it (tools/share_groups.py).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.primitives import Reader
from minikafka.tools.admin_client import COORDINATOR_KEY_GROUP, AdminClient, AdminError, Node, check, error_name
from minikafka.tools.cli import OneLineArgumentParser
from minikafka.tools.share_groups import describe_share_group, print_members, print_offsets, print_state

MISSING = "-"
LATEST = -1
EARLIEST = -2
CONSUMER_PROTOCOL = "consumer"
TopicPartition = tuple[str, int]


class CommandError(Exception):
    """Printed as ConsumerGroupCommand.printError does ("\\nError: ..." on stdout); exit 1."""


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    coordinator: Node
    state: str
    assignor: str
    members: tuple[Member, ...] = field(default=())


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """The partitions of a ConsumerProtocolAssignment (all versions start with them; not flexible)."""
    if not data:
        return ()
    reader = Reader(data, 2, what="consumer assignment")  # after the version
    assigned = []
    for _ in range(max(reader.array_length(), 0)):
        name = reader.string()
        assigned += [(name, reader.int32()) for _ in range(max(reader.array_length(), 0))]
    return tuple(assigned)


def tp_text(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


# --- requests ------------------------------------------------------------------------------


def list_groups(client: AdminClient, states: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(group id, state) of the consumer groups on every broker; the state is "" before ListGroups v4."""
    found = []
    for _node_id, connection in sorted(client.all_brokers().items()):
        body = connection.request(ApiKey.LIST_GROUPS, states_filter=list(states), types_filter=[])
        check(body.error_code, "ListGroups")
        found += [(g.group_id, getattr(g, "group_state", "")) for g in body.groups
                  if g.protocol_type in (CONSUMER_PROTOCOL, "")]
    return sorted(found)


def describe_group(client: AdminClient, group_id: str) -> GroupDescription:
    node, connection = client.coordinator(group_id, COORDINATOR_KEY_GROUP)
    body = connection.request(ApiKey.DESCRIBE_GROUPS, groups=[group_id], include_authorized_operations=False)
    group = body.groups[0]
    if group.error_code == ErrorCode.group_id_not_found:  # v6+; older versions answer state Dead
        return GroupDescription(group_id, node, "Dead", "")
    check(group.error_code, f"DescribeGroups {group_id}")
    members = tuple(Member(m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
                           decode_assignment(m.member_assignment)) for m in group.members)
    return GroupDescription(group_id, node, group.group_state, group.protocol_data, members)


def committed_offsets(client: AdminClient, group_id: str) -> dict[TopicPartition, tuple[int, int]]:
    """Committed (offset, leader epoch) of every partition of the group, from its coordinator."""
    _node, connection = client.coordinator(group_id, COORDINATOR_KEY_GROUP)
    version, body = connection.request_versioned(
        ApiKey.OFFSET_FETCH, group_id=group_id, topics=None, require_stable=False,
        groups=[{"group_id": group_id, "member_id": None, "member_epoch": -1, "topics": None}])
    if version >= 8:
        answer = body.groups[0]
        check(answer.error_code, f"OffsetFetch {group_id}")
        topics = answer.topics
    else:
        if hasattr(body, "error_code"):
            check(body.error_code, f"OffsetFetch {group_id}")
        topics = body.topics
    found = {}
    for topic in topics:
        for p in topic.partitions:
            check(p.error_code, f"OffsetFetch {topic.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                found[(topic.name, p.partition_index)] = (p.committed_offset,
                                                          getattr(p, "committed_leader_epoch", -1))
    return found


def partitions_of(client: AdminClient, topics: Sequence[str]) -> dict[str, list[int]]:
    meta = client.metadata(topics)
    for topic in topics:
        if topic in meta.topic_errors:
            raise CommandError(f"Executing consumer group command failed due to {error_name(meta.topic_errors[topic])}")
    return {topic: sorted(meta.partitions[topic]) for topic in topics}


# --- --list --------------------------------------------------------------------------------


def list_action(client: AdminClient, args: argparse.Namespace, out: TextIO, _err: TextIO) -> None:
    if args.state is None:
        for group_id, _state in list_groups(client):
            out.write(group_id + "\n")
        return
    states = [s.strip() for s in args.state.split(",") if s.strip()]
    groups = list_groups(client, states)
    width = max([15, *(len(g) for g, _s in groups)]) + 10
    out.write(f"{'GROUP':<{width}} {'STATE':<20}\n")
    for group_id, state in groups:
        out.write(f"{group_id:<{width}} {state or 'Unknown':<20}\n")


# --- --describe ----------------------------------------------------------------------------


def _member_state_printable(group: GroupDescription, rows: int, out: TextIO, err: TextIO) -> bool:
    """ConsumerGroupCommand.shouldPrintMemberState."""
    if group.state == "Dead":
        out.write(f"\nError: Consumer group '{group.group_id}' does not exist.\n")
        return False
    if group.state == "Empty":
        err.write(f"\nConsumer group '{group.group_id}' has no active members.\n")
    elif group.state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        err.write(f"\nWarning: Consumer group '{group.group_id}' is rebalancing.\n")
    return rows > 0


@dataclass(frozen=True, slots=True)
class OffsetRow:
    group: str
    topic: str
    partition: str
    leader_epoch: str
    offset: str
    log_end_offset: str
    lag: str
    consumer_id: str
    host: str
    client_id: str


def _offset_rows(client: AdminClient, group: GroupDescription) -> list[OffsetRow]:
    committed = committed_offsets(client, group.group_id)
    owners: list[tuple[Member | None, list[TopicPartition]]] = [
        (m, sorted(m.assignment)) for m in sorted(group.members, key=lambda m: -len(m.assignment)) if m.assignment]
    assigned = {tp for _m, tps in owners for tp in tps}
    unassigned = sorted(tp for tp in committed if tp not in assigned)
    if unassigned:
        owners.append((None, unassigned))
    log_end = client.list_offsets([tp for _m, tps in owners for tp in tps], LATEST)
    rows = []
    for member, tps in owners:
        for tp in tps:
            offset, epoch = committed.get(tp, (-1, -1))
            end = log_end.get(tp, -1)
            rows.append(OffsetRow(
                group.group_id, tp[0], str(tp[1]), str(epoch) if offset >= 0 and epoch >= 0 else MISSING,
                str(offset) if offset >= 0 else MISSING, str(end) if end >= 0 else MISSING,
                str(end - offset) if offset >= 0 and end >= 0 else MISSING,
                member.member_id if member else MISSING, member.host if member else MISSING,
                member.client_id if member else MISSING))
    return rows


def _print_offsets(group: GroupDescription, rows: list[OffsetRow], verbose: bool, out: TextIO,
                   err: TextIO) -> None:
    if not _member_state_printable(group, len(rows), out, err):
        return
    g = max([15, *(len(r.group) for r in rows)])
    t = max([15, *(len(r.topic) for r in rows)])
    c = max([15, *(len(r.consumer_id) for r in rows)])
    h = max([15, *(len(r.host) for r in rows)])

    def line(r: OffsetRow) -> str:
        epoch = f" {r.leader_epoch:<15}" if verbose else ""
        return (f"\n{r.group:<{g}} {r.topic:<{t}} {r.partition:<10}{epoch} {r.offset:<15} {r.log_end_offset:<15} "
                f"{r.lag:<15} {r.consumer_id:<{c}} {r.host:<{h}} {r.client_id}")

    header = OffsetRow("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                       "CONSUMER-ID", "HOST", "CLIENT-ID")
    out.write("".join(line(r) for r in (header, *rows)) + "\n")


def _assignment_text(tps: Sequence[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in tps:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(sorted(f"{topic}:" + ",".join(str(p) for p in sorted(ps)) for topic, ps in by_topic.items()))


def _print_members(group: GroupDescription, verbose: bool, out: TextIO, err: TextIO) -> None:
    members = group.members
    g, c, i, h, k, a = 15, 15, 17, 15, 15, 20
    with_instance = False
    if _member_state_printable(group, len(members), out, err):
        g = max([g, len(group.group_id)])
        c = max([c, *(len(m.member_id) for m in members)])
        i = max([i, *(len(m.instance_id or "") for m in members)])
        h = max([h, *(len(m.host) for m in members)])
        k = max([k, *(len(m.client_id) for m in members)])
        a = max([a, *(len(_assignment_text(m.assignment) or MISSING) for m in members)])
        with_instance = any(m.instance_id for m in members)

    def cells(group_id: str, member_id: str, instance: str, host: str, client: str, count: str) -> str:
        middle = f"{instance:<{i}} " if with_instance else ""
        return f"{group_id:<{g}} {member_id:<{c}} {middle}{host:<{h}} {client:<{k}} {count:<15} "

    header = cells("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
    if verbose:
        header += f"{'CURRENT-EPOCH':<15} {'CURRENT-ASSIGNMENT':<{a}} {'TARGET-EPOCH':<15} {'TARGET-ASSIGNMENT':<20}"
    out.write("\n" + header + "\n")
    if group.state == "Dead":
        return
    for m in members:
        row = cells(group.group_id, m.member_id, m.instance_id or "", m.host, m.client_id, str(len(m.assignment)))
        if verbose:
            # Classic-protocol members have no epochs and no target assignment (KIP-848 fields).
            row += f"{MISSING:<15} {_assignment_text(m.assignment) or MISSING:<{a}} {MISSING:<15} {MISSING:<20}"
        out.write(row + "\n")


def _print_state(group: GroupDescription, verbose: bool, out: TextIO, err: TextIO) -> None:
    if not _member_state_printable(group, 1, out, err):
        return
    coordinator = f"{group.coordinator.host}:{group.coordinator.port}  ({group.coordinator.node_id})"
    c = max(25, len(coordinator))
    g = max(15, len(group.group_id))
    assignor = group.assignor or MISSING
    if verbose:
        # Classic groups have no group epoch or target assignment epoch (KIP-848 fields).
        verbose_rows = [("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                         "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"),
                        (group.group_id, coordinator, assignor, group.state, MISSING, MISSING,
                         str(len(group.members)))]
        out.write("".join(f"\n{r[0]:<{g}} {r[1]:<{c}} {r[2]:<20} {r[3]:<20} {r[4]:<15} {r[5]:<25} {r[6]}"
                          for r in verbose_rows) + "\n")
    else:
        rows = [("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                (group.group_id, coordinator, assignor, group.state, str(len(group.members)))]
        out.write("".join(f"\n{r[0]:<{g}} {r[1]:<{c}} {r[2]:<20} {r[3]:<20} {r[4]}" for r in rows) + "\n")


def _group_ids(client: AdminClient, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [group_id for group_id, _state in list_groups(client)]
    if not args.group:
        raise UsageError(f"Option [{args.action_name}] takes one of these options: [all-groups], [group]")
    return list(args.group)


def describe_action(client: AdminClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    missing = False
    for group_id in sorted(_group_ids(client, args)):
        shared = describe_share_group(client, group_id)
        if shared is not None:
            if args.members:
                print_members(shared, args.verbose, out, err)
            elif args.state is not None:
                print_state(shared, args.verbose, out, err)
            else:
                print_offsets(client, shared, args.verbose, out)
            continue
        group = describe_group(client, group_id)
        missing = missing or group.state == "Dead"
        if args.members:
            _print_members(group, args.verbose, out, err)
        elif args.state is not None:
            _print_state(group, args.verbose, out, err)
        else:
            rows = [] if group.state == "Dead" else _offset_rows(client, group)
            _print_offsets(group, rows, args.verbose, out, err)
    if missing:
        raise ToolFailed


# --- --reset-offsets -----------------------------------------------------------------------


def _clamp(client: AdminClient, requested: dict[TopicPartition, int], err: TextIO) -> dict[TopicPartition, int]:
    """GroupOffsetsResetter.checkOffsetsRange: into [log start, log end]."""
    starts = client.list_offsets(requested, EARLIEST)
    ends = client.list_offsets(requested, LATEST)
    clamped = {}
    for tp, offset in requested.items():
        if offset > ends[tp]:
            err.write(f"WARN New offset ({offset}) is higher than latest offset for topic partition {tp_text(tp)}. "
                      f"Value will be set to {ends[tp]}.\n")
            offset = ends[tp]
        elif offset < starts[tp]:
            err.write(f"WARN New offset ({offset}) is lower than earliest offset for topic partition {tp_text(tp)}. "
                      f"Value will be set to {starts[tp]}.\n")
            offset = starts[tp]
        clamped[tp] = offset
    return clamped


def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: YYYY-MM-DDTHH:mm:SS.sss with an optional zone (local time without one)."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"Error parsing datetime '{text}': expected format 'YYYY-MM-DDTHH:mm:SS.sss'") from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()
    return int(parsed.timestamp() * 1000)


def _new_offsets(client: AdminClient, args: argparse.Namespace, group_id: str, partitions: list[TopicPartition],
                 out: TextIO, err: TextIO) -> dict[TopicPartition, int]:
    if args.to_offset is not None:
        return _clamp(client, {tp: args.to_offset for tp in partitions}, err)
    if args.to_earliest:
        return client.list_offsets(partitions, EARLIEST)
    if args.to_latest:
        return client.list_offsets(partitions, LATEST)
    if args.shift_by is not None or args.to_current:
        current = committed_offsets(client, group_id)
        if args.to_current:
            missing = [tp for tp in partitions if tp not in current]
            ends = client.list_offsets(missing, LATEST) if missing else {}
            return {tp: current[tp][0] if tp in current else ends[tp] for tp in partitions}
        for tp in partitions:
            if tp not in current:
                raise UsageError(f"Cannot shift offset for partition {tp_text(tp)} since there is no current "
                                 "committed offset")
        return _clamp(client, {tp: current[tp][0] + args.shift_by for tp in partitions}, err)
    if args.to_datetime is not None:
        by_time = client.list_offsets(partitions, parse_datetime(args.to_datetime))
        empty = [tp for tp in partitions if by_time[tp] < 0]
        for tp in empty:
            out.write(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling back to latest known offset.\n")
        return {**by_time, **(client.list_offsets(empty, LATEST) if empty else {})}
    raise UsageError("Option [reset-offsets] requires one of the following scenarios: [to-offset], [to-datetime], "
                     "[by-duration], [to-earliest], [to-latest], [shift-by], [from-file], [to-current]")


def _partitions_to_reset(client: AdminClient, args: argparse.Namespace, group_id: str) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed_offsets(client, group_id))
    if not args.topic:
        raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    named: list[TopicPartition] = []
    whole: list[str] = []
    for arg in args.topic:
        if ":" not in arg:
            whole.append(arg)
            continue
        topic, _sep, partitions = arg.partition(":")
        try:
            named += [(topic, int(p)) for p in partitions.split(",")]
        except ValueError:
            raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions") from None
    existing = partitions_of(client, sorted({t for t, _p in named} | set(whole)))
    unknown = [tp for tp in named if tp[1] not in existing[tp[0]]]
    if unknown:
        raise CommandError("Executing consumer group command failed due to The partitions \""
                           + ",".join(tp_text(tp) for tp in unknown) + "\" do not exist")
    return named + [(t, p) for t in whole for p in existing[t]]


def reset_action(client: AdminClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    if args.dry_run and args.execute:
        raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
    if not args.dry_run and not args.execute:
        err.write("WARN: No action will be performed as the --execute option is missing.In a future major release, "
                  "the default behavior of this command will be to prompt the user before executing the reset "
                  "rather than doing a dry run. You should add the --dry-run option explicitly if you are scripting "
                  "this command and want to keep the current default behavior without prompting.\n")
    plan: dict[str, dict[TopicPartition, int]] = {}
    failures = []
    for group_id in _group_ids(client, args):
        state = describe_group(client, group_id).state
        if state not in ("Empty", "Dead"):
            failures.append(f"Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                            f"state is {state}.")
            out.write(f"\nError: {failures[-1]}\n")
            plan[group_id] = {}
            continue
        offsets = _new_offsets(client, args, group_id, _partitions_to_reset(client, args, group_id), out, err)
        if args.execute:
            _commit(client, group_id, offsets)
        plan[group_id] = offsets
    _print_reset_plan(plan, out)
    if failures:
        raise ToolFailed


def _commit(client: AdminClient, group_id: str, offsets: dict[TopicPartition, int]) -> None:
    """Admin.alterConsumerGroupOffsets: a commit outside any generation, which needs an empty group."""
    _node, connection = client.coordinator(group_id, COORDINATOR_KEY_GROUP)
    topics: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset,
                                             "committed_leader_epoch": -1, "committed_metadata": "",
                                             "commit_timestamp": -1})
    body = connection.request(ApiKey.OFFSET_COMMIT, group_id=group_id, generation_id_or_member_epoch=-1,
                              member_id="", group_instance_id=None, retention_time_ms=-1,
                              topics=[{"name": name, "partitions": parts} for name, parts in topics.items()])
    for topic in body.topics:
        for p in topic.partitions:
            if p.error_code != 0:
                raise CommandError(f"Executing consumer group command failed due to {error_name(p.error_code)}")


def _print_reset_plan(plan: dict[str, dict[TopicPartition, int]], out: TextIO) -> None:
    """GroupOffsetsResetter.printOffsetsToReset (rows sorted: Kafka prints them in hash order)."""
    g = max([15, *(len(group) for group in plan)])
    t = max([15, *(len(tp[0]) for offsets in plan.values() for tp in offsets)])
    text = f"\n{'GROUP':<{g}} {'TOPIC':<{t}} {'PARTITION':<10} NEW-OFFSET" if plan else ""
    for group_id, offsets in plan.items():
        text += "".join(f"\n{group_id:<{g}} {topic:<{t}} {partition!s:<10} {offset}"
                        for (topic, partition), offset in sorted(offsets.items()))
    out.write(text + "\n")


# --- --delete / --delete-offsets -----------------------------------------------------------


def delete_action(client: AdminClient, args: argparse.Namespace, out: TextIO, _err: TextIO) -> None:
    deleted, failed = [], []
    for group_id in _group_ids(client, args):
        _node, connection = client.coordinator(group_id, COORDINATOR_KEY_GROUP)
        body = connection.request(ApiKey.DELETE_GROUPS, groups_names=[group_id])
        code = body.results[0].error_code
        if code == 0:
            deleted.append(group_id)
        else:
            failed.append((group_id, error_name(code)))
    quoted = ", ".join(f"'{g}'" for g in deleted)
    if not failed:
        out.write(f"Deletion of requested consumer groups ({quoted}) was successful.\n")
        return
    out.write("\nError: Deletion of some consumer groups failed:\n")
    for group_id, reason in failed:
        out.write(f"* Group '{group_id}' could not be deleted due to: {reason}\n")
    if deleted:
        out.write(f"\nThese consumer groups were deleted successfully: {quoted}\n")
    raise ToolFailed


def delete_offsets_action(client: AdminClient, args: argparse.Namespace, out: TextIO, _err: TextIO) -> None:
    if not args.group or len(args.group) != 1 or not args.topic:
        raise UsageError("Option [delete-offsets] takes the following options: [group], [topic]")
    group_id = args.group[0]
    named: set[TopicPartition] = set()
    whole = []
    for arg in args.topic:
        if ":" in arg:
            topic, _sep, partitions = arg.partition(":")
            named |= {(topic, int(p)) for p in partitions.split(",")}
        else:
            whole.append(arg)
    results: dict[TopicPartition, str | None] = {}
    meta = client.metadata(whole) if whole else None
    for topic in whole:
        assert meta is not None
        if topic in meta.topic_errors:
            results[(topic, -1)] = error_name(meta.topic_errors[topic])
        else:
            named |= {(topic, p) for p in meta.partitions[topic]}
    _node, connection = client.coordinator(group_id, COORDINATOR_KEY_GROUP)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(named):
        by_topic.setdefault(topic, []).append(partition)
    body = connection.request(ApiKey.OFFSET_DELETE, group_id=group_id, topics=[
        {"name": name, "partitions": [{"partition_index": p} for p in parts]} for name, parts in by_topic.items()])
    top = ErrorCode(int(body.error_code))
    for topic in body.topics:
        for p in topic.partitions:
            results[(topic.name, p.partition_index)] = None if p.error_code == 0 else error_name(p.error_code)
    if top == ErrorCode.none and any(results.values()):
        top = next(ErrorCode[r.lower()] for r in results.values() if r)
    if top == ErrorCode.none:
        out.write(f"Request succeeded for deleting offsets from group {group_id}.\n")
    elif top in (ErrorCode.invalid_group_id, ErrorCode.group_id_not_found, ErrorCode.group_authorization_failed,
                 ErrorCode.non_empty_group):
        out.write(f"\nError: {error_name(top)}\n")
    elif top in (ErrorCode.group_subscribed_to_topic, ErrorCode.topic_authorization_failed,
                 ErrorCode.unknown_topic_or_partition):
        out.write("\nError: Encountered some partition-level error, see the follow-up details.\n")
    else:
        out.write(f"\nError: Encountered some unknown error: {error_name(top)}\n")
    t = max([15, *(len(tp[0]) for tp in results)])
    text = f"\n{'TOPIC':<{t}} {'PARTITION':<10} {'STATUS':<15}"
    for (topic, partition), error in sorted(results.items(), key=lambda item: item[0][0] + str(item[0][1])):
        status = f"Error: {error}" if error else "Successful"
        text += f"\n{topic:<{t}} {str(partition) if partition >= 0 else MISSING:<10} {status:<15}"
    out.write(text + "\n")
    if top != ErrorCode.none:
        raise ToolFailed


# --- entry point ---------------------------------------------------------------------------


class UsageError(Exception):
    """Kafka's printUsageAndExit: the message on stderr, exit 1."""


class ToolFailed(Exception):
    """The action printed its own error; exit 1."""


ACTIONS: dict[str, Callable[[AdminClient, argparse.Namespace, TextIO, TextIO], None]] = {
    "list": list_action, "describe": describe_action, "reset_offsets": reset_action, "delete": delete_action,
    "delete_offsets": delete_offsets_action,
}


def _parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog="minikafka consumer-groups",
                                     description="List all consumer groups, describe a consumer group, delete "
                                                 "consumer group info, or reset consumer group offsets.")
    parser.add_argument("--bootstrap-server", required=True, metavar="server to connect to",
                        help="The server(s) to connect to (host:port, comma-separated).")
    for action, text in (("list", "List all consumer groups."), ("describe", "Describe consumer group and list "
                         "offset lag (number of messages not yet processed) related to given group."),
                         ("delete", "Pass in groups to delete topic partition offsets and ownership information "
                          "over the entire consumer group."),
                         ("reset-offsets", "Reset offsets of consumer group."),
                         ("delete-offsets", "Delete offsets of consumer group.")):
        parser.add_argument(f"--{action}", action="store_true", help=text)
    parser.add_argument("--group", action="append", metavar="consumer group",
                        help="The consumer group we wish to act on.")
    parser.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    parser.add_argument("--topic", action="append", metavar="topic",
                        help="The topic whose consumer group information should be deleted or reset "
                             "(topic or topic:partition,partition).")
    parser.add_argument("--all-topics", action="store_true", help="Consider all topics assigned to a group.")
    parser.add_argument("--members", action="store_true", help="Describe members of the group.")
    parser.add_argument("--offsets", action="store_true", help="Describe the group and list all topic partitions "
                                                               "in the group along with their offset information.")
    parser.add_argument("--state", nargs="?", const="", default=None,
                        help="With --describe, the state of the group; with --list, filter by state.")
    parser.add_argument("--verbose", action="store_true", help="Provide additional information, if any.")
    parser.add_argument("--dry-run", action="store_true", help="Only show results without executing changes.")
    parser.add_argument("--execute", action="store_true", help="Execute operation.")
    parser.add_argument("--to-offset", type=int, help="Reset offsets to a specific offset.")
    parser.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    parser.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    parser.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    parser.add_argument("--shift-by", type=int, help="Reset offsets shifting current offset by 'n'.")
    parser.add_argument("--to-datetime", help="Reset offsets to offset from datetime. Format: "
                                              "'YYYY-MM-DDTHH:mm:SS.sss'")
    parser.add_argument("--timeout", type=int, default=30_000,
                        help="Give up after this many milliseconds (default 30000).")
    return parser


def main(argv: Sequence[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = _parser().parse_args(list(argv))
    chosen = [name for name in ACTIONS if getattr(args, name)]
    if len(chosen) != 1:
        err.write("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                  "--delete-offsets\n")
        return 1
    args.action_name = chosen[0].replace("_", "-")
    try:
        with AdminClient(args.bootstrap_server, args.timeout / 1000) as client:
            ACTIONS[chosen[0]](client, args, out, err)
    except UsageError as exc:
        err.write(f"{exc}\n")
        return 1
    except CommandError as exc:
        out.write(f"\nError: {exc}\n")
        return 1
    except AdminError as exc:
        out.write(f"\nError: Executing consumer group command failed due to {exc}\n")
        return 1
    except ToolFailed:
        return 1
    return 0
