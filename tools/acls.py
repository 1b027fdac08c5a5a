"""`minikafka acls`: Kafka's kafka-acls.sh (AclCommand) without a JVM, over the wire protocol, so it works
against minikafka and Apache Kafka alike.

--add (CreateAcls), --remove (DeleteAcls) and --list (DescribeAcls) on the resources named by --topic,
--group, --cluster and --transactional-id, with AclCommand's defaults: --operation All, hosts `*` for
the principals given, --resource-pattern-type LITERAL (ANY for --list). --remove without --force asks
for a confirmation on stdin, as AclCommand does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from minikafka.protocol.api_keys import ApiKey
from minikafka.tools.admin_client import AdminClient, AdminError, Connection, error_name
from minikafka.tools.cli import OneLineArgumentParser, fail

PROG = "minikafka acls"
DEFAULT_TIMEOUT_MS = 30_000
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
ACTIONS = ("add", "remove", "list")

# Kafka's AclOperation, ResourceType, PatternType and AclPermissionType codes (the wire's numbers).
OPERATIONS = {"ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
              "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12,
              "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
RESOURCE_TYPES = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}
# Pattern types a filter may use but an ACL may not have (AclCommand refuses them with --add).
FILTER_ONLY_PATTERNS = ("ANY", "MATCH")


def _name_of(codes: dict[str, int], code: int) -> str:
    return next((name for name, value in codes.items() if value == code), "UNKNOWN")


def _key(text: str) -> str:
    """AclCommand reads `DescribeConfigs`, `describe_configs` and `DESCRIBECONFIGS` alike."""
    return text.replace("_", "").replace("-", "").upper()


def _operation(text: str) -> int:
    wanted = _key(text)
    for name, code in OPERATIONS.items():
        if name != "ANY" and _key(name) == wanted:
            return code
    fail(PROG, f"invalid operation {text!r}: choose from "
               f"{', '.join(n.title().replace('_', '') for n in OPERATIONS if n != 'ANY')}")


def _pattern_type(text: str) -> str:
    wanted = _key(text)
    if wanted not in PATTERN_TYPES:
        fail(PROG, f"invalid --resource-pattern-type {text!r}: choose from "
                   f"{', '.join(n.lower() for n in PATTERN_TYPES)}")
    return wanted


@dataclass(frozen=True)
class Pattern:
    resource_type: int
    name: str | None
    pattern_type: int

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={_name_of(RESOURCE_TYPES, self.resource_type)}, name={self.name}, "
                f"patternType={_name_of(PATTERN_TYPES, self.pattern_type)})")


@dataclass(frozen=True)
class Entry:
    principal: str
    host: str
    operation: int
    permission: int

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={_name_of(OPERATIONS, self.operation)}, "
                f"permissionType={_name_of(PERMISSIONS, self.permission)})")


# --- what the arguments ask for --------------------------------------------------------------


def _patterns(args: argparse.Namespace, action: str) -> list[Pattern]:
    pattern_type = args.resource_pattern_type or ("ANY" if action == "list" else "LITERAL")
    if action == "add" and pattern_type in FILTER_ONLY_PATTERNS:
        fail(PROG, f"A '--resource-pattern-type' value of '{pattern_type}' is not valid when adding acls.")
    code = PATTERN_TYPES[pattern_type]
    patterns = [Pattern(RESOURCE_TYPES["TOPIC"], topic, code) for topic in args.topic or ()]
    patterns += [Pattern(RESOURCE_TYPES["GROUP"], group, code) for group in args.group or ()]
    patterns += [Pattern(RESOURCE_TYPES["TRANSACTIONAL_ID"], tid, code) for tid in args.transactional_id or ()]
    if args.cluster:
        patterns.append(Pattern(RESOURCE_TYPES["CLUSTER"], CLUSTER_NAME, code))
    if not patterns and action != "list":
        fail(PROG, "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
                   "--transactional-id <id>")
    return patterns


def _principal(text: str) -> str:
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        fail(PROG, f"expected a principal as <type>:<name> (e.g. User:alice), not {text!r}")
    return text


def _entries(args: argparse.Namespace) -> list[Entry]:
    """AclCommand.getAcls: each principal on each of its hosts (`*` when none is given), each operation."""
    operations = [_operation(text) for text in args.operation or ["All"]]
    found = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, PERMISSIONS["ALLOW"]),
                                          (args.deny_principal, args.deny_host, PERMISSIONS["DENY"])):
        for principal in principals or ():
            for host in hosts or [WILDCARD]:
                found += [Entry(_principal(principal), host, operation, permission) for operation in operations]
    return found


def _check_args(args: argparse.Namespace) -> str:
    chosen = [action for action in ACTIONS if getattr(args, action)]
    if len(chosen) != 1:
        fail(PROG, "Command must include exactly one action: --list, --add, --remove.")
    action = chosen[0]
    if action == "add" and not (args.allow_principal or args.deny_principal):
        fail(PROG, "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    if args.allow_host and not args.allow_principal:
        fail(PROG, "--allow-host can only be used with --allow-principal")
    if args.deny_host and not args.deny_principal:
        fail(PROG, "--deny-host can only be used with --deny-principal")
    if action == "list" and (args.allow_principal or args.deny_principal or args.operation):
        fail(PROG, "--list takes --principal to filter by principal, not --allow-principal, --deny-principal or "
                   "--operation")
    if args.force and action != "remove":
        fail(PROG, f'Option "[force]" can\'t be used with option "[{action}]"')
    return action


# --- requests ------------------------------------------------------------------------------


def _describe(connection: Connection, pattern: Pattern | None, principal: str | None = None,
              entry: Entry | None = None) -> dict[Pattern, list[Entry]]:
    """DescribeAcls for one resource filter (None: every resource), as AclCommand lists them."""
    body = connection.request(
        ApiKey.DESCRIBE_ACLS,
        resource_type_filter=pattern.resource_type if pattern else RESOURCE_TYPES["ANY"],
        resource_name_filter=pattern.name if pattern else None,
        pattern_type_filter=pattern.pattern_type if pattern else PATTERN_TYPES["ANY"],
        principal_filter=entry.principal if entry else principal, host_filter=entry.host if entry else None,
        operation=entry.operation if entry else OPERATIONS["ANY"],
        permission_type=entry.permission if entry else PERMISSIONS["ANY"])
    if body.error_code != 0:
        raise AdminError(body.error_message or error_name(body.error_code))
    return {Pattern(r.resource_type, r.resource_name, r.pattern_type):
            [Entry(a.principal, a.host, a.operation, a.permission_type) for a in r.acls] for r in body.resources}


def _print_current(connection: Connection, patterns: Sequence[Pattern | None], out: TextIO,
                   principal: str | None = None) -> None:
    for pattern in patterns:
        for resource, entries in sorted(_describe(connection, pattern, principal).items(), key=lambda i: str(i[0])):
            out.write(f"Current ACLs for resource `{resource}`: \n")
            out.writelines(f" \t{entry} \n" for entry in entries)
            out.write("\n")


def add_action(client: AdminClient, args: argparse.Namespace, out: TextIO, _inp: TextIO) -> None:
    patterns = _patterns(args, "add")
    entries = _entries(args)
    connection = client.any_broker()
    for pattern in patterns:
        out.write(f"Adding ACLs for resource `{pattern}`: \n")
        out.writelines(f" \t{entry} \n" for entry in entries)
        out.write("\n")
        body = connection.request(ApiKey.CREATE_ACLS, creations=[
            {"resource_type": pattern.resource_type, "resource_name": pattern.name,
             "resource_pattern_type": pattern.pattern_type, "principal": entry.principal, "host": entry.host,
             "operation": entry.operation, "permission_type": entry.permission} for entry in entries])
        for result in body.results:
            if result.error_code != 0:
                raise AdminError(result.error_message or error_name(result.error_code))
    _print_current(connection, patterns, out)


def _confirmed(pattern: Pattern, out: TextIO, inp: TextIO) -> bool:
    out.write(f"Are you sure you want to delete all ACLs for resource filter `{pattern}`? (y/n)\n")
    out.flush()
    return inp.readline().strip().lower() in ("y", "yes")


def remove_action(client: AdminClient, args: argparse.Namespace, out: TextIO, inp: TextIO) -> None:
    """The ACLs given (or all of the resource's, with no principal) on each resource filter."""
    patterns = _patterns(args, "remove")
    entries: list[Entry | None] = list(_entries(args)) or [None]
    connection = client.any_broker()
    for pattern in patterns:
        if not args.force and not _confirmed(pattern, out, inp):
            continue
        body = connection.request(ApiKey.DELETE_ACLS, filters=[
            {"resource_type_filter": pattern.resource_type, "resource_name_filter": pattern.name,
             "pattern_type_filter": pattern.pattern_type,
             "principal_filter": entry.principal if entry else None, "host_filter": entry.host if entry else None,
             "operation": entry.operation if entry else OPERATIONS["ANY"],
             "permission_type": entry.permission if entry else PERMISSIONS["ANY"]} for entry in entries])
        for result in body.filter_results:
            if result.error_code != 0:
                raise AdminError(result.error_message or error_name(result.error_code))
    _print_current(connection, patterns, out)


def list_action(client: AdminClient, args: argparse.Namespace, out: TextIO, _inp: TextIO) -> None:
    patterns: list[Pattern | None] = list(_patterns(args, "list")) or [None]
    principal = _principal(args.principal) if args.principal else None
    _print_current(client.any_broker(), patterns, out, principal)


COMMANDS: dict[str, Callable[[AdminClient, argparse.Namespace, TextIO, TextIO], None]] = {
    "add": add_action, "remove": remove_action, "list": list_action,
}


# --- entry point ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description="Add, remove or list ACLs (Kafka's kafka-acls.sh).")
    parser.add_argument("--bootstrap-server", metavar="host:port", required=True,
                        help="The Kafka server to connect to (host:port, comma-separated).")
    parser.add_argument("--add", action="store_true", help="Add ACLs.")
    parser.add_argument("--remove", action="store_true", help="Remove ACLs.")
    parser.add_argument("--list", action="store_true", help="List ACLs for the given resources (or all).")
    parser.add_argument("--topic", action="append", metavar="topic", help="A topic resource (repeatable).")
    parser.add_argument("--group", action="append", metavar="group", help="A consumer group resource (repeatable).")
    parser.add_argument("--transactional-id", action="append", metavar="id",
                        help="A transactional id resource (repeatable).")
    parser.add_argument("--cluster", action="store_true", help="The cluster resource.")
    parser.add_argument("--resource-pattern-type", type=_pattern_type, metavar="type",
                        help="LITERAL or PREFIXED (default LITERAL); --list and --remove also take ANY and MATCH "
                             "(--list's default is ANY).")
    parser.add_argument("--allow-principal", action="append", metavar="principal",
                        help="A principal (User:name) given ALLOW ACLs (repeatable).")
    parser.add_argument("--deny-principal", action="append", metavar="principal",
                        help="A principal (User:name) given DENY ACLs (repeatable).")
    parser.add_argument("--allow-host", action="append", metavar="host",
                        help="A host --allow-principal is allowed from (repeatable; default *).")
    parser.add_argument("--deny-host", action="append", metavar="host",
                        help="A host --deny-principal is denied from (repeatable; default *).")
    parser.add_argument("--operation", action="append", metavar="operation",
                        help="An operation, e.g. Read, Write, Describe, All (repeatable; default All).")
    parser.add_argument("--principal", metavar="principal", help="With --list: only this principal's ACLs.")
    parser.add_argument("--force", action="store_true", help="With --remove: do not ask for a confirmation.")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_MS, metavar="ms",
                        help=f"Give up after this many milliseconds (default {DEFAULT_TIMEOUT_MS}).")
    return parser


def main(argv: Sequence[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr, inp: TextIO = sys.stdin) -> int:
    args = _parser().parse_args(list(argv))
    action = _check_args(args)
    try:
        with AdminClient(args.bootstrap_server, args.timeout / 1000) as client:
            COMMANDS[action](client, args, out, inp)
    except AdminError as exc:
        err.write(f"Error while executing ACL command: {exc}\n")
        return 1
    return 0

