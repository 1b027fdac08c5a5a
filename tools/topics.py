"""`minikafka topics`: Kafka's kafka-topics.sh (TopicCommand) without a JVM, over the wire protocol, so it
works against minikafka and Apache Kafka alike.

Actions and messages follow TopicCommand: --create (CreateTopics), --delete (DeleteTopics), --alter
--partitions (CreatePartitions), --list and --describe (Metadata, DescribeConfigs). As in TopicCommand,
--topic is a regular expression for every action but --create.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.tools.admin_client import AdminClient, AdminError, Connection, error_name

DEFAULT_TIMEOUT_MS = 30_000
USE_BROKER_DEFAULT = -1
MAX_REPLICATION_FACTOR = 32767
RESOURCE_TYPE_TOPIC = 2
# DescribeConfigs config sources that TopicCommand prints: only what was set on the topic itself.
CONFIG_SOURCE_DYNAMIC_TOPIC = 1
ACTIONS = ("create", "delete", "alter", "list", "describe")


class UsageError(Exception):
    """Bad arguments (CommandLineUtils.printUsageAndExit): one line on stderr, exit 1."""


class CommandError(Exception):
    """TopicCommand's "Error while executing topic command : ..." (stdout), exit 1."""


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints the usage and then the error: the tool's contract is a single line."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _config_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f'Invalid topic config: all configs to be added must be in the format "key=val", '
                         f"not {text!r}.")
    return key, value


def _check_args(args: argparse.Namespace) -> str:
    """TopicCommandOptions.checkArgs: the chosen action, or UsageError."""
    chosen = [action for action in ACTIONS if getattr(args, action)]
    if len(chosen) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    action = chosen[0]
    if action in ("create", "alter", "delete") and not args.topic:
        raise UsageError(f'Missing required argument "[topic]" for --{action}')
    if action == "alter" and args.partitions is None:
        raise UsageError('Missing required argument "[partitions]" for --alter')
    if args.replication_factor is not None and action != "create":
        raise UsageError('Option "[replication-factor]" can\'t be used with option "[' + action + ']"')
    if args.config and action != "create":
        raise UsageError('Option "[config]" can\'t be used with option "[' + action + ']"')
    if args.partitions is not None and action not in ("create", "alter"):
        raise UsageError('Option "[partitions]" can\'t be used with option "[' + action + ']"')
    if args.if_not_exists and action != "create":
        raise UsageError('Option "[if-not-exists]" can\'t be used with option "[' + action + ']"')
    if args.if_exists and action not in ("alter", "delete", "describe"):
        raise UsageError('Option "[if-exists]" can\'t be used with option "[' + action + ']"')
    if args.partitions is not None and args.partitions < 1:
        raise UsageError("The partitions must be greater than 0")
    if args.replication_factor is not None and not 1 <= args.replication_factor <= MAX_REPLICATION_FACTOR:
        raise UsageError(f"The replication factor must be between 1 and {MAX_REPLICATION_FACTOR} inclusive")
    args.config_pairs = [_config_pair(text) for text in args.config or ()]
    return action


# --- requests ------------------------------------------------------------------------------


def _timeout_ms(client: AdminClient) -> int:
    return max(1, int((client.deadline - time.monotonic()) * 1000))


def _topic_metadata(connection: Connection, topics: Sequence[str] | None) -> Any:
    """Metadata for the named topics, or all of them (None)."""
    version = connection.version_for(ApiKey.METADATA)
    if topics is None:
        wanted: list[dict[str, str]] | None = [] if version == 0 else None
    else:
        wanted = [{"name": name} for name in topics]
    return connection.request(ApiKey.METADATA, topics=wanted, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)


def existing_topics(client: AdminClient, *, exclude_internal: bool = False) -> list[str]:
    body = _topic_metadata(client.any_broker(), None)
    return sorted(t.name for t in body.topics
                  if t.error_code == 0 and not (exclude_internal and getattr(t, "is_internal", False)))


def matching_topics(client: AdminClient, pattern: str | None, *, exclude_internal: bool = False) -> list[str]:
    """TopicCommand's IncludeList: --topic is a regular expression matched against the whole name."""
    topics = existing_topics(client, exclude_internal=exclude_internal)
    if pattern is None:
        return topics
    try:
        compiled = re.compile(pattern)
    except re.error:
        return [t for t in topics if t == pattern]
    return [t for t in topics if compiled.fullmatch(t)]


def _ensure_found(found: list[str], args: argparse.Namespace) -> None:
    """TopicCommand.ensureTopicExists: no match is an error unless --if-exists."""
    if not found and not args.if_exists:
        raise CommandError(f"Topic '{args.topic}' does not exist as expected")


def create_action(client: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    configs = [{"name": key, "value": value} for key, value in args.config_pairs]
    topic = {"name": args.topic, "num_partitions": args.partitions or USE_BROKER_DEFAULT,
             "replication_factor": args.replication_factor or USE_BROKER_DEFAULT, "assignments": [],
             "configs": configs}
    body = client.any_broker().request(ApiKey.CREATE_TOPICS, topics=[topic], timeout=_timeout_ms(client),
                                       validate_only=False)
    result = body.topics[0]
    code = ErrorCode(int(result.error_code))
    if code == ErrorCode.topic_already_exists:
        if args.if_not_exists:
            return
        raise CommandError(f"Topic '{args.topic}' already exists.")
    if code != ErrorCode.none:
        raise CommandError(getattr(result, "error_message", None) or error_name(code))
    out.write(f"Created topic {args.topic}.\n")


def delete_action(client: AdminClient, args: argparse.Namespace, _out: TextIO) -> None:
    found = matching_topics(client, args.topic, exclude_internal=True)
    _ensure_found(found, args)
    if not found:
        return
    body = client.any_broker().request(ApiKey.DELETE_TOPICS, topic_names=found,
                                       topics=[{"name": name, "topic_id": None} for name in found],
                                       timeout=_timeout_ms(client))
    for result in body.responses:
        if result.error_code != 0:
            raise CommandError(getattr(result, "error_message", None) or
                               f"{result.name}: {error_name(result.error_code)}")


def alter_action(client: AdminClient, args: argparse.Namespace, _out: TextIO) -> None:
    found = matching_topics(client, args.topic, exclude_internal=True)
    _ensure_found(found, args)
    if not found:
        return
    body = client.any_broker().request(
        ApiKey.CREATE_PARTITIONS, timeout=_timeout_ms(client), validate_only=False,
        topics=[{"name": name, "count": args.partitions, "assignments": None} for name in found])
    for result in body.results:
        if result.error_code != 0:
            raise CommandError(getattr(result, "error_message", None) or
                               f"{result.name}: {error_name(result.error_code)}")


def list_action(client: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    for name in matching_topics(client, args.topic, exclude_internal=args.exclude_internal):
        out.write(name + "\n")


def _topic_configs(connection: Connection, topics: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """The configs set on each topic (not the broker's defaults), as TopicCommand prints them."""
    body = connection.request(ApiKey.DESCRIBE_CONFIGS, include_synonyms=False, include_documentation=False,
                              resources=[{"resource_type": RESOURCE_TYPE_TOPIC, "resource_name": name,
                                          "configuration_keys": None} for name in topics])
    found: dict[str, list[tuple[str, str]]] = {}
    for result in body.results:
        if result.error_code != 0:
            continue
        found[result.resource_name] = sorted(
            (c.name, "" if c.is_sensitive else c.value or "") for c in result.configs
            if getattr(c, "config_source", CONFIG_SOURCE_DYNAMIC_TOPIC) == CONFIG_SOURCE_DYNAMIC_TOPIC
            and not getattr(c, "is_default", False))
    return found


def _ids(nodes: Sequence[int]) -> str:
    return ",".join(str(n) for n in nodes)


def describe_action(client: AdminClient, args: argparse.Namespace, out: TextIO) -> None:
    found = matching_topics(client, args.topic, exclude_internal=args.exclude_internal)
    _ensure_found(found, args)
    if not found:
        return
    connection = client.any_broker()
    configs = _topic_configs(connection, found)
    body = _topic_metadata(connection, found)
    for topic in sorted(body.topics, key=lambda t: t.name):
        if topic.error_code != 0:
            continue
        partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
        replication = len(partitions[0].replica_nodes) if partitions else 0
        topic_id = getattr(topic, "topic_id", None)
        config_text = ",".join(f"{k}={v}" for k, v in configs.get(topic.name, []))
        out.write(f"Topic: {topic.name}\tTopicId: {topic_id if topic_id is not None else 'none'}\t"
                  f"PartitionCount: {len(partitions)}\tReplicationFactor: {replication}\tConfigs: {config_text}\n")
        for p in partitions:
            leader = "none" if p.leader_id < 0 else str(p.leader_id)
            out.write(f"\tTopic: {topic.name}\tPartition: {p.partition_index}\tLeader: {leader}\t"
                      f"Replicas: {_ids(p.replica_nodes)}\tIsr: {_ids(p.isr_nodes)}\tElr: \tLastKnownElr: \n")


COMMANDS: dict[str, Callable[[AdminClient, argparse.Namespace, TextIO], None]] = {
    "create": create_action, "delete": delete_action, "alter": alter_action, "list": list_action,
    "describe": describe_action,
}


# --- entry point ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="minikafka topics", description="Create, delete, describe, or change a topic.")
    parser.add_argument("--bootstrap-server", metavar="host:port",
                        help="The Kafka server to connect to (host:port, comma-separated).")
    parser.add_argument("--create", action="store_true", help="Create a new topic.")
    parser.add_argument("--delete", action="store_true", help="Delete a topic.")
    parser.add_argument("--alter", action="store_true", help="Alter the number of partitions of a topic.")
    parser.add_argument("--list", action="store_true", help="List all available topics.")
    parser.add_argument("--describe", action="store_true", help="List details for the given topics.")
    parser.add_argument("--topic", metavar="topic",
                        help="The topic to create, alter, describe or delete; a regular expression except with "
                             "--create.")
    parser.add_argument("--partitions", type=int, metavar="# of partitions",
                        help="The number of partitions for the topic being created or altered.")
    parser.add_argument("--replication-factor", type=int, metavar="replication factor",
                        help="The replication factor for each partition in the topic being created.")
    parser.add_argument("--config", action="append", metavar="name=value",
                        help="A topic configuration override for the topic being created (repeatable).")
    parser.add_argument("--if-not-exists", action="store_true",
                        help="With --create, only create the topic if it does not already exist.")
    parser.add_argument("--if-exists", action="store_true",
                        help="With --alter, --delete or --describe, only act if the topic exists.")
    parser.add_argument("--exclude-internal", action="store_true",
                        help="Exclude internal topics when listing or describing topics.")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_MS, metavar="ms",
                        help=f"Give up after this many milliseconds (default {DEFAULT_TIMEOUT_MS}).")
    return parser


def main(argv: Sequence[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    try:
        args = _parser().parse_args(list(argv))
        action = _check_args(args)
        if not args.bootstrap_server:
            raise UsageError('Missing required argument "[bootstrap-server]"')
        with AdminClient(args.bootstrap_server, args.timeout / 1000) as client:
            COMMANDS[action](client, args, out)
    except UsageError as exc:
        err.write(f"{exc}\n")
        return 1
    except CommandError as exc:
        err.write(f"Error while executing topic command : {exc}\n")
        return 1
    except AdminError as exc:
        err.write(f"Error while executing topic command : {exc}\n")
        return 1
    return 0
