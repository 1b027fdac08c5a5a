"""One module per Kafka API. Each declares API_KEY, VERSIONS and `async def handle(ctx, request)`.

HANDLER_INDEX repeats what each module declares (its API key, VERSIONS, and ADVERTISED_VERSIONS where it
differs) so a broker builds its ApiVersions answer without importing sixty modules at start (about 30 ms): a
module is imported at its API's first request (broker/wire/registry.py). The modules stay the truth:
tests/unit/broker/test_handler_registry.py fails while a row differs from its module, and prints the rows
to paste; the registry also refuses a module whose declarations differ from its row when it imports it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# module, API key, VERSIONS min and max, ADVERTISED_VERSIONS min and max
HANDLER_INDEX: tuple[tuple[str, int, int, int, int, int], ...] = (
    ("api_versions", 18, 0, 4, 0, 4),
    ("metadata", 3, 0, 13, 0, 13),
    ("describe_topic_partitions", 75, 0, 0, 0, 0),
    ("produce", 0, 3, 13, 0, 13),
    ("fetch", 1, 4, 18, 4, 18),
    ("list_offsets", 2, 1, 11, 1, 11),
    ("create_topics", 19, 2, 7, 2, 7),
    ("delete_topics", 20, 1, 6, 1, 6),
    ("create_partitions", 37, 0, 3, 0, 3),
    ("describe_configs", 32, 1, 4, 1, 4),
    ("incremental_alter_configs", 44, 0, 1, 0, 1),
    ("alter_configs", 33, 0, 2, 0, 2),
    ("list_config_resources", 74, 0, 1, 0, 1),
    ("describe_client_quotas", 48, 0, 1, 0, 1),
    ("alter_client_quotas", 49, 0, 1, 0, 1),
    ("describe_cluster", 60, 0, 1, 0, 1),
    ("offset_for_leader_epoch", 23, 2, 4, 2, 4),
    ("delete_records", 21, 0, 2, 0, 2),
    ("init_producer_id", 22, 0, 5, 0, 5),
    ("describe_producers", 61, 0, 0, 0, 0),
    ("write_txn_markers", 27, 1, 1, 1, 1),
    ("add_partitions_to_txn", 24, 0, 5, 0, 5),
    ("add_offsets_to_txn", 25, 0, 3, 0, 3),
    ("end_txn", 26, 0, 5, 0, 5),
    ("txn_offset_commit", 28, 0, 5, 0, 5),
    ("describe_transactions", 65, 0, 0, 0, 0),
    ("list_transactions", 66, 0, 1, 0, 1),
    ("find_coordinator", 10, 0, 6, 0, 6),
    ("join_group", 11, 0, 9, 0, 9),
    ("sync_group", 14, 0, 5, 0, 5),
    ("heartbeat", 12, 0, 4, 0, 4),
    ("leave_group", 13, 0, 5, 0, 5),
    ("offset_commit", 8, 2, 9, 2, 9),
    ("offset_fetch", 9, 1, 9, 1, 9),
    ("describe_groups", 15, 0, 5, 0, 5),
    ("list_groups", 16, 0, 5, 0, 5),
    ("delete_groups", 42, 0, 2, 0, 2),
    ("offset_delete", 47, 0, 0, 0, 0),
    ("consumer_group_heartbeat", 68, 0, 1, 0, 1),
    ("consumer_group_describe", 69, 0, 1, 0, 1),
    ("get_telemetry_subscriptions", 71, 0, 0, 0, 0),
    ("push_telemetry", 72, 0, 0, 0, 0),
    ("share_group_heartbeat", 76, 1, 1, 1, 1),
    ("share_fetch", 78, 1, 2, 1, 2),
    ("share_acknowledge", 79, 1, 2, 1, 2),
    ("share_group_describe", 77, 1, 1, 1, 1),
    ("describe_share_group_offsets", 90, 0, 1, 0, 1),
    ("alter_share_group_offsets", 91, 0, 0, 0, 0),
    ("delete_share_group_offsets", 92, 0, 0, 0, 0),
    ("sasl_handshake", 17, 1, 1, 0, 1),
    ("sasl_authenticate", 36, 0, 2, 0, 2),
    ("describe_user_scram_credentials", 50, 0, 0, 0, 0),
    ("alter_user_scram_credentials", 51, 0, 0, 0, 0),
    ("create_acls", 30, 1, 3, 1, 3),
    ("describe_acls", 29, 1, 3, 1, 3),
    ("delete_acls", 31, 1, 3, 1, 3),
    ("describe_log_dirs", 35, 1, 4, 1, 4),
    ("elect_leaders", 43, 0, 2, 0, 2),
    ("alter_partition_reassignments", 45, 0, 1, 0, 1),
    ("list_partition_reassignments", 46, 0, 0, 0, 0),
)

HANDLER_MODULES = tuple(row[0] for row in HANDLER_INDEX)


def handler_module(name: str) -> ModuleType:
    return importlib.import_module(f"{__name__}.{name}")


def all_handler_modules() -> list[ModuleType]:
    """Every handler module, imported (tests and tools; a broker imports each at its first request)."""
    return [handler_module(name) for name in HANDLER_MODULES]
