"""`minikafka configs`: the client-quota part of Kafka's kafka-configs.sh (ConfigCommand), over the wire
protocol (AlterClientQuotas, DescribeClientQuotas), so it works against minikafka and Apache Kafka alike.

    minikafka configs --bootstrap-server HOST:PORT --alter --entity-type clients --entity-name app \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    minikafka configs --bootstrap-server HOST:PORT --describe --entity-type users --entity-name alice \\
        --entity-type clients --entity-default

--entity-type is users, clients or ips; each is followed by --entity-name NAME or --entity-default (the
type's default entity). --describe without a name or default lists every entity of the types given.
Topic, broker and group configs are not handled here (they are IncrementalAlterConfigs'; see
docs/configuration.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

from minikafka.protocol.api_keys import ApiKey
from minikafka.tools.admin_client import AdminClient, AdminError, Connection, error_name
from minikafka.tools.cli import OneLineArgumentParser, fail

PROG = "minikafka configs"
DEFAULT_TIMEOUT_MS = 30_000
# kafka-configs.sh's entity types -> the quota API's.
ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_DESCRIBED_AS = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]  # (quota entity type, name or None for the default)


@dataclass(frozen=True)
class Selector:
    entity_type: str  # the quota API's: user, client-id, ip
    name: str | None
    default: bool


def alter_quotas(connection: Connection, entity: Entity, add: dict[str, float], delete: Iterable[str],
                 *, validate_only: bool = False) -> None:
    """One AlterClientQuotas entry; AdminError with the broker's message if it refuses it."""
    ops = [{"key": key, "value": value, "remove": False} for key, value in add.items()]
    ops += [{"key": key, "value": 0.0, "remove": True} for key in delete]
    body = connection.request(ApiKey.ALTER_CLIENT_QUOTAS, validate_only=validate_only, entries=[
        {"entity": [{"entity_type": kind, "entity_name": name} for kind, name in entity], "ops": ops}])
    for entry in body.entries:
        if entry.error_code != 0:
            raise AdminError(entry.error_message or error_name(entry.error_code))


def describe_quotas(connection: Connection, components: Sequence[tuple[str, int, str | None]], *,
                    strict: bool = True) -> list[tuple[Entity, dict[str, float]]]:
    """DescribeClientQuotas: each matching entity with its quota values."""
    body = connection.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, strict=strict, components=[
        {"entity_type": kind, "match_type": match_type, "match": match} for kind, match_type, match in components])
    if body.error_code != 0:
        raise AdminError(body.error_message or error_name(body.error_code))
    return [(tuple((e.entity_type, e.entity_name) for e in entry.entity), {v.key: v.value for v in entry.values})
            for entry in body.entries or ()]


def describe_entity(entity: Entity) -> str:
    """ConfigCommand's words for an entity: user-principal 'alice', the default client-id."""
    names = dict(entity)
    parts = []
    for kind in ("user", "client-id", "ip"):
        if kind in names:
            name, described = names[kind], _DESCRIBED_AS[kind]
            parts.append(f"{described} '{name}'" if name is not None else f"the default {described}")
    return ", ".join(parts)


def _parse_add(text: str) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            fail(PROG, f"invalid --add-config {item!r}: expected key=value")
        try:
            values[key.strip()] = float(value.strip())
        except ValueError:
            fail(PROG, f"invalid --add-config {item!r}: the value of a quota is a number")
    return values


def _selectors(args: argparse.Namespace) -> list[Selector]:
    """--entity-type with the --entity-name or --entity-default after it, in command-line order."""
    selectors: list[Selector] = []
    for kind, name in args.entities:
        if kind == "type":
            selectors.append(Selector(ENTITY_TYPES[name], None, False))
            continue
        if not selectors:
            fail(PROG, "--entity-name and --entity-default must follow an --entity-type")
        last = selectors[-1]
        if last.name is not None or last.default:
            fail(PROG, "one --entity-name or --entity-default per --entity-type")
        selectors[-1] = Selector(last.entity_type, name if kind == "name" else None, kind == "default")
    if not selectors:
        fail(PROG, "--entity-type is required")
    if len({s.entity_type for s in selectors}) != len(selectors):
        fail(PROG, "an --entity-type may be given once")
    return selectors


class _EntityAction(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        kind = {"--entity-type": "type", "--entity-name": "name", "--entity-default": "default"}[str(option_string)]
        namespace.entities = [*(getattr(namespace, "entities", None) or []), (kind, values)]


def _parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description="Alter or describe client quotas (Kafka's "
                                                          "kafka-configs.sh for users, clients and ips).")
    parser.add_argument("--bootstrap-server", metavar="host:port", required=True,
                        help="The Kafka server to connect to (host:port, comma-separated).")
    parser.add_argument("--alter", action="store_true", help="Set or delete quota configs of the entity.")
    parser.add_argument("--describe", action="store_true", help="Show the quota configs of the entities named.")
    parser.add_argument("--entity-type", action=_EntityAction, choices=sorted(ENTITY_TYPES), dest="entities",
                        help="users, clients or ips; repeat for a user and client-id pair.")
    parser.add_argument("--entity-name", action=_EntityAction, dest="entities", metavar="name",
                        help="The name of the entity of the --entity-type before it.")
    parser.add_argument("--entity-default", action=_EntityAction, nargs=0, dest="entities",
                        help="The default entity of the --entity-type before it.")
    parser.add_argument("--add-config", metavar="k=v,k2=v2", help="Quota configs to set, e.g. producer_byte_rate=1024.")
    parser.add_argument("--delete-config", metavar="k,k2", help="Quota configs to remove.")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_MS, metavar="ms",
                        help=f"Give up after this many milliseconds (default {DEFAULT_TIMEOUT_MS}).")
    parser.set_defaults(entities=[])
    return parser


def _alter(connection: Connection, selectors: list[Selector], args: argparse.Namespace, out: TextIO) -> None:
    if any(s.name is None and not s.default for s in selectors):
        fail(PROG, "--alter needs an --entity-name or --entity-default for each --entity-type")
    add = _parse_add(args.add_config) if args.add_config else {}
    delete = [key.strip() for key in args.delete_config.split(",") if key.strip()] if args.delete_config else []
    if not add and not delete:
        fail(PROG, "--alter needs --add-config or --delete-config")
    entity: Entity = tuple((s.entity_type, s.name) for s in selectors)
    alter_quotas(connection, entity, add, delete)
    out.write(f"Completed updating config for {describe_entity(entity)}.\n")


def _describe(connection: Connection, selectors: list[Selector], out: TextIO) -> None:
    components = [(s.entity_type, MATCH_EXACT if s.name is not None else MATCH_DEFAULT if s.default
                   else MATCH_SPECIFIED, s.name) for s in selectors]
    for entity, values in describe_quotas(connection, components, strict=True):
        configs = ", ".join(f"{key}={float(value)!r}" for key, value in sorted(values.items()))
        out.write(f"Quota configs for {describe_entity(entity)} are {configs}\n")


def main(argv: Sequence[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = _parser().parse_args(list(argv))
    if args.alter == args.describe:
        fail(PROG, "exactly one of --alter or --describe is required")
    selectors = _selectors(args)
    try:
        with AdminClient(args.bootstrap_server, args.timeout / 1000) as client:
            connection = client.any_broker()
            if args.alter:
                _alter(connection, selectors, args, out)
            else:
                _describe(connection, selectors, out)
    except AdminError as exc:
        err.write(f"Error while executing config command: {exc}\n")
        return 1
    return 0
