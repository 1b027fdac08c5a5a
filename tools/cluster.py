"""`minikafka cluster`: a running broker's nodes and partition leaders, and failover drills, through its
admin listener (docs/cluster.md).

    minikafka cluster --admin-url http://127.0.0.1:PORT describe
    minikafka cluster --admin-url ... stop-node 2 | start-node 2
    minikafka cluster --admin-url ... move-leader TOPIC PARTITION NODE
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from minikafka.tools.cli import OneLineArgumentParser

TIMEOUT_S = 30.0
TOKEN_ENV = "MINIKAFKA_ADMIN_TOKEN"


def _call(admin_url: str, method: str, path: str, body: object = None, token: str | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(admin_url.rstrip("/") + path, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return json.loads(response.read())


def _describe(snapshot: dict[str, Any]) -> str:
    lines = [f"Controller: {snapshot['controller_id']}"]
    for node in snapshot["nodes"]:
        endpoints = ", ".join(f"{name}://{address}" for name, address in node["endpoints"].items())
        lines.append(f"Node {node['node_id']}\t{'online' if node['online'] else 'stopped'}\t{endpoints}")
    for state in snapshot["partitions"]:
        lines.append(f"Topic: {state['topic']}\tPartition: {state['partition']}\tLeader: {state['leader']}\t"
                     f"Epoch: {state['leader_epoch']}\tReplicas: {','.join(map(str, state['replicas']))}\t"
                     f"Isr: {','.join(map(str, state['isr']))}" + _moving(state))
    return "\n".join(lines)


def _moving(state: dict[str, Any]) -> str:
    """A reassignment under way, as kafka-topics.sh --describe shows it."""
    adding, removing = state.get("adding") or [], state.get("removing") or []
    if not adding and not removing:
        return ""
    return f"\tAdding Replicas: {','.join(map(str, adding))}\tRemoving Replicas: {','.join(map(str, removing))}"


def _admin_url_problem(url: str) -> str | None:
    """What is wrong with an admin listener URL, or None; urllib would fail on it with a traceback."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected http://HOST:PORT"
    try:
        port = parts.port
    except ValueError:
        return "the port must be from 1 to 65535"
    if port is None or port == 0:
        return "expected http://HOST:PORT"
    return None


def main(argv: list[str]) -> int:
    parser = OneLineArgumentParser(prog="minikafka cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--admin-url", required=True, help="the broker's admin listener, http://127.0.0.1:PORT")
    parser.add_argument("--admin-token", default=os.environ.get(TOKEN_ENV),
                        help=f"the listener's admin.listener.token, if it has one (default: ${TOKEN_ENV})")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("describe", help="nodes, and every partition's leader, epoch, replicas and ISR")
    for name in ("stop-node", "start-node"):
        commands.add_parser(name).add_argument("node", type=int)
    move = commands.add_parser("move-leader", help="make a replica the partition's leader")
    move.add_argument("topic")
    move.add_argument("partition", type=int)
    move.add_argument("node", type=int)
    args = parser.parse_args(argv)
    problem = _admin_url_problem(args.admin_url)
    if problem is not None:
        print(f"minikafka cluster: invalid --admin-url {args.admin_url!r}: {problem}", file=sys.stderr)
        return 2
    try:
        if args.command == "describe":
            print(_describe(_call(args.admin_url, "GET", "/cluster", token=args.admin_token)))
        elif args.command in ("stop-node", "start-node"):
            action = args.command.removesuffix("-node")
            print(_describe(_call(args.admin_url, "POST", f"/cluster/nodes/{args.node}/{action}",
                                  token=args.admin_token)))
        else:
            topic = urllib.parse.quote(args.topic, safe="")
            state = _call(args.admin_url, "POST", f"/cluster/partitions/{topic}/{args.partition}/leader",
                          {"node": args.node}, token=args.admin_token)
            print(f"Topic: {state['topic']}\tPartition: {state['partition']}\tLeader: {state['leader']}\t"
                  f"Epoch: {state['leader_epoch']}")
    except urllib.error.HTTPError as exc:
        print(f"minikafka cluster: {json.loads(exc.read() or b'{}').get('error', exc)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"minikafka cluster: cannot reach {args.admin_url}: {exc}", file=sys.stderr)
        return 1
    return 0
