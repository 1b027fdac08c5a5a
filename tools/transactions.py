"""`minikafka transactions`: Kafka's kafka-transactions.sh (org.apache.kafka.tools.TransactionsCommand)
without a JVM, over the wire protocol, so it works against minikafka and Apache Kafka alike.

Commands, options, tables and messages follow TransactionsCommand: list, describe, describe-producers,
abort (WriteTxnMarkers to the partition leader, as Admin.abortTransaction) and find-hanging
(DescribeProducers, then ListTransactions by producer id and DescribeTransactions to tell a
transaction its coordinator still tracks from one it has forgotten).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.build import ms
from minikafka.protocol.errors import ErrorCode
from minikafka.tools.admin_client import (
    COORDINATOR_KEY_TRANSACTION,
    AdminClient,
    AdminError,
    error_name,
)
from minikafka.tools.cli import OneLineArgumentParser

MAX_BATCH_SIZE = 500
DEBUG_HINT = " Enable debug logging for additional detail."


class ToolExit(Exception):
    """Print `message` on stderr and exit 1, as TransactionsCommand.printErrorAndExit."""


def fail(message: str, cause: AdminError | None = None) -> ToolExit:
    if cause is None:
        return ToolExit(message)
    # Kafka prints the exception's message; a broker error is shown by its Kafka error name.
    reason = error_name(cause.code) if cause.code is not None else str(cause)
    return ToolExit(f"{message}: {reason}.{DEBUG_HINT}")


def _raise_code(code: Any) -> None:
    if int(code) != 0:
        raise AdminError(error_name(code), ErrorCode(int(code)))


def pretty_print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    """TransactionsCommand.prettyPrintTable: columns padded to their widest cell, each followed by a tab."""
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    for row in (headers, *rows):
        out.write("".join(cell.ljust(widths[i]) + "\t" for i, cell in enumerate(row)) + "\n")


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: none
    txn_start_offset: int  # -1: no open transaction


OpenTransaction = tuple[tuple[str, int], ProducerState]


def describe_producers(client: AdminClient, partitions: Sequence[tuple[str, int]],
                       broker_id: int | None) -> dict[tuple[str, int], list[ProducerState]]:
    """DescribeProducers on each partition's leader, or on `broker_id` when given."""
    by_connection: dict[int, tuple[Any, list[tuple[str, int]]]] = {}
    for topic, partition in partitions:
        connection = client.node(broker_id) if broker_id is not None else client.leader(topic, partition)
        by_connection.setdefault(id(connection), (connection, []))[1].append((topic, partition))
    found: dict[tuple[str, int], list[ProducerState]] = {}
    for connection, tps in by_connection.values():
        topics: dict[str, list[int]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(partition)
        body = connection.request(ApiKey.DESCRIBE_PRODUCERS, topics=[
            {"name": name, "partition_indexes": indexes} for name, indexes in topics.items()])
        for topic in body.topics:
            for p in topic.partitions:
                _raise_code(p.error_code)
                found[(topic.name, p.partition_index)] = [
                    ProducerState(a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                                  a.coordinator_epoch, a.current_txn_start_offset)
                    for a in p.active_producers]
    return found


def list_transactions(client: AdminClient, producer_ids: Sequence[int] = ()) -> dict[int, list[Any]]:
    """ListTransactions on every broker (each is the coordinator of some ids), by broker id."""
    listings = {}
    for node_id, connection in sorted(client.all_brokers().items()):
        body = connection.request(ApiKey.LIST_TRANSACTIONS, state_filters=[], producer_id_filters=list(producer_ids),
                                  duration_filter=-1, transactional_id_pattern=None)
        _raise_code(body.error_code)
        listings[node_id] = list(body.transaction_states)
    return listings


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator_id: int
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int  # -1: none
    partitions: tuple[tuple[str, int], ...]


def describe_transaction(client: AdminClient, transactional_id: str) -> TransactionDescription:
    node, connection = client.coordinator(transactional_id, COORDINATOR_KEY_TRANSACTION)
    body = connection.request(ApiKey.DESCRIBE_TRANSACTIONS, transactional_ids=[transactional_id])
    state = body.transaction_states[0]
    _raise_code(state.error_code)
    return TransactionDescription(
        node.node_id, state.producer_id, state.producer_epoch, state.transaction_state,
        ms(state.transaction_timeout), _start_time(state.transaction_start_time),
        tuple((t.topic, p) for t in state.topics for p in t.partitions))


def _start_time(value: Any) -> int:
    """-1 when the transaction has no start time (the admin client reads it back as 0, see admin_client)."""
    started = ms(value)
    return started if started > 0 else -1


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --- commands ------------------------------------------------------------------------------


def cmd_list(client: AdminClient, _args: argparse.Namespace, out: TextIO) -> None:
    try:
        listings = list_transactions(client)
    except AdminError as exc:
        raise fail("Failed to list transactions", exc) from None
    rows = [[t.transactional_id, str(node_id), str(t.producer_id), t.transaction_state]
            for node_id, found in listings.items() for t in found]
    pretty_print_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows, out)


def cmd_describe(client: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    tid = args.transactional_id
    try:
        found = describe_transaction(client, tid)
    except AdminError as exc:
        raise fail(f"Failed to describe transaction state of transactional-id `{tid}`", exc) from None
    started = found.start_time_ms >= 0
    row = [str(found.coordinator_id), tid, str(found.producer_id), str(found.producer_epoch), found.state,
           str(found.timeout_ms), str(found.start_time_ms) if started else "None",
           str(now_ms() - found.start_time_ms) if started else "None",
           ",".join(f"{topic}-{partition}" for topic, partition in found.partitions)]
    pretty_print_table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                        "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                        "TopicPartitions"], [row], out)


def cmd_describe_producers(client: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    tp = (args.topic, args.partition)
    try:
        producers = describe_producers(client, [tp], args.broker_id)[tp]
    except AdminError as exc:
        where = f"broker {args.broker_id}" if args.broker_id is not None else "leader"
        raise fail(f"Failed to describe producers for partition {tp[0]}-{tp[1]} on {where}", exc) from None
    rows = [[str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
             str(p.last_timestamp), str(p.txn_start_offset) if p.txn_start_offset >= 0 else "None"]
            for p in producers]
    pretty_print_table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                        "CurrentTransactionStartOffset"], rows, out)


def cmd_abort(client: AdminClient, args: argparse.Namespace, _out: TextIO) -> None:
    tp = (args.topic, args.partition)
    if args.start_offset is None and args.producer_id is None:
        raise fail("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 "
                   "or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise fail("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise fail("Missing required argument --coordinator-epoch")
        # A transaction that hung before its producer id's first marker shows coordinator epoch -1;
        # 0 is at most any real coordinator epoch, as in Kafka.
        spec = (args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0))
    else:
        try:
            producers = describe_producers(client, [tp], None)[tp]
        except AdminError as exc:
            raise fail(f"Failed to validate producer state for partition {tp[0]}-{tp[1]}", exc) from None
        match = next((p for p in producers if p.txn_start_offset >= 0 and p.txn_start_offset == args.start_offset),
                     None)
        if match is None:
            raise fail(f"Could not find any open transactions starting at offset {args.start_offset} "
                       f"on partition {tp[0]}-{tp[1]}")
        spec = (match.producer_id, match.producer_epoch, max(match.coordinator_epoch, 0))
    producer_id, producer_epoch, coordinator_epoch = spec
    described = (f"AbortTransactionSpec(topicPartition={tp[0]}-{tp[1]}, producerId={producer_id}, "
                 f"producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})")
    try:
        body = client.leader(*tp).request(ApiKey.WRITE_TXN_MARKERS, markers=[{
            "producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
            "coordinator_epoch": coordinator_epoch, "topics": [{"name": tp[0], "partition_indexes": [tp[1]]}]}])
        for marker in body.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    _raise_code(p.error_code)
    except AdminError as exc:
        raise fail(f"Failed to abort transaction {described}", exc) from None


def cmd_find_hanging(client: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    if args.topic is None and args.broker_id is None:
        raise fail("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search")
    if args.partition is not None and args.topic is None:
        raise fail("The --partition argument requires --topic to be provided")
    max_timeout_ms = args.max_transaction_timeout * 60_000
    partitions = _partitions_to_search(client, args.topic, args.partition, args.broker_id)
    candidates: list[OpenTransaction] = []
    for start in range(0, len(partitions), MAX_BATCH_SIZE):
        batch = partitions[start:start + MAX_BATCH_SIZE]
        try:
            found = describe_producers(client, batch, args.broker_id)
        except AdminError as exc:
            where = f"Optional[{args.broker_id}]" if args.broker_id is not None else "Optional.empty"
            raise fail(f"Failed to describe producers for {len(batch)} partitions on broker {where}",
                       exc) from None
        current = now_ms()
        candidates += [(tp, p) for tp, producers in found.items() for p in producers
                       if p.txn_start_offset >= 0 and current - p.last_timestamp > max_timeout_ms]
    hanging = _filter_hanging(client, candidates) if candidates else []
    current = now_ms()
    rows = [[tp[0], str(tp[1]), str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch),
             str(p.txn_start_offset), str(p.last_timestamp), str((current - p.last_timestamp) // 60_000)]
            for tp, p in hanging]
    pretty_print_table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"], rows, out)


def _partitions_to_search(client: AdminClient, topic: str | None, partition: int | None,
                          broker_id: int | None) -> list[tuple[str, int]]:
    if topic is not None and partition is not None:
        return [(topic, partition)]
    topics = [] if topic is None else [topic]
    try:
        if topic is None:
            # Admin.listTopics leaves internal topics out by default.
            everything = client.metadata(refresh=True)
            topics = sorted(set(everything.partitions) - everything.internal)
        meta = client.metadata(topics)
        for name in topics:
            if name in meta.topic_errors:
                _raise_code(meta.topic_errors[name])
    except AdminError as exc:
        raise fail(f"Failed to describe {len(topics)} topics", exc) from None
    return [(name, index) for name in topics for index, (_leader, replicas) in sorted(meta.partitions[name].items())
            if broker_id is None or broker_id in replicas]


def _filter_hanging(client: AdminClient, candidates: list[OpenTransaction]) -> list[OpenTransaction]:
    producer_ids = sorted({p.producer_id for _tp, p in candidates})
    try:
        listings = list_transactions(client, producer_ids)
    except AdminError as exc:
        raise fail(f"Failed to list transactions for {len(producer_ids)} producers", exc) from None
    transactional_ids = {t.producer_id: t.transactional_id for found in listings.values() for t in found
                         if t.producer_id in producer_ids}
    descriptions: dict[str, TransactionDescription | None] = {}
    for tid in sorted(set(transactional_ids.values())):
        try:
            descriptions[tid] = describe_transaction(client, tid)
        except AdminError as exc:
            if exc.code != ErrorCode.transactional_id_not_found:
                raise fail(f"Failed to describe {len(set(transactional_ids.values()))} transactions",
                           exc) from None
            descriptions[tid] = None
    hanging = []
    for tp, producer in candidates:
        tid = transactional_ids.get(producer.producer_id)
        description = descriptions.get(tid) if tid is not None else None
        # The coordinator still lists every partition of an ongoing transaction, and those whose
        # markers are pending: any other open transaction will never get a marker from it.
        if description is None or tp not in description.partitions:
            hanging.append((tp, producer))
    return hanging


# --- entry point ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="minikafka transactions",
        description="This tool is used to analyze the transactional state of producers in the cluster. "
                    "It can be used to detect and recover from hanging transactions.")
    parser.add_argument("--bootstrap-server", required=True, metavar="host:port",
                        help="hostname and port for the broker to connect to, in the form `host:port` "
                             "(multiple comma-separated entries can be given)")
    parser.add_argument("--timeout-ms", type=int, default=30_000, help="give up after this long (default 30000)")
    commands = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    commands.add_parser("list", help="list transactions")
    describe = commands.add_parser("describe", help="describe the state of an active transactional-id",
                                   description="Describe the state of an active transactional-id.")
    describe.add_argument("--transactional-id", required=True, help="transactional id")
    producers = commands.add_parser("describe-producers",
                                    help="describe the states of active producers for a topic partition")
    producers.add_argument("--broker-id", type=int,
                           help="optional broker id to describe the producer state on a specific replica")
    producers.add_argument("--topic", required=True, help="topic name")
    producers.add_argument("--partition", type=int, required=True, help="partition number")
    abort = commands.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    abort.add_argument("--topic", required=True, help="topic name")
    abort.add_argument("--partition", type=int, required=True, help="partition number")
    newer = abort.add_argument_group("Brokers on versions 3.0 and above",
                                     "For newer brokers, only the start offset of the transaction to be aborted "
                                     "is required")
    newer.add_argument("--start-offset", type=int, help="start offset of the transaction to abort")
    older = abort.add_argument_group("Brokers on versions older than 3.0",
                                     "For older brokers, you must provide all of these arguments")
    older.add_argument("--producer-id", type=int, help="producer id")
    older.add_argument("--producer-epoch", type=int, help="producer epoch")
    older.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    hanging.add_argument("--max-transaction-timeout", type=int, default=15,
                         help="maximum transaction timeout in minutes to limit the scope of the search")
    hanging.add_argument("--topic", help="topic name to limit search to")
    hanging.add_argument("--partition", type=int, help="partition number")
    return parser


COMMANDS = {"list": cmd_list, "describe": cmd_describe, "describe-producers": cmd_describe_producers,
            "abort": cmd_abort, "find-hanging": cmd_find_hanging}


def main(argv: Sequence[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = _parser().parse_args(list(argv))
    try:
        with AdminClient(args.bootstrap_server, args.timeout_ms / 1000) as client:
            COMMANDS[args.command](client, args, out)
    except ToolExit as exc:
        print(exc, file=err)
        return 1
    except AdminError as exc:
        print(f"minikafka transactions: {exc}", file=err)
        return 1
    return 0

