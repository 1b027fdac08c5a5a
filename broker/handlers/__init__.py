"""One module per Kafka API. Each declares API_KEY, VERSIONS and `async def handle(ctx, request)`."""

from __future__ import annotations

import importlib
from types import ModuleType

HANDLER_MODULES = (
    "api_versions",
    "metadata",
    "describe_topic_partitions",
    "produce",
    "fetch",
    "list_offsets",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "incremental_alter_configs",
    "alter_configs",
    "describe_cluster",
    "offset_for_leader_epoch",
    "delete_records",
    "init_producer_id",
    "describe_producers",
    "write_txn_markers",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "txn_offset_commit",
    "describe_transactions",
    "list_transactions",
    "find_coordinator",
    "join_group",
    "sync_group",
    "heartbeat",
    "leave_group",
    "offset_commit",
    "offset_fetch",
    "describe_groups",
    "list_groups",
    "delete_groups",
    "offset_delete",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "share_group_heartbeat",
    "share_fetch",
    "share_acknowledge",
    "share_group_describe",
    "describe_share_group_offsets",
    "alter_share_group_offsets",
    "delete_share_group_offsets",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "create_acls",
    "describe_acls",
    "delete_acls",
)


def all_handler_modules() -> list[ModuleType]:
    return [importlib.import_module(f"{__name__}.{name}") for name in HANDLER_MODULES]
