"""Authorized operations as a Kafka broker without an authorizer reports them (KIP-430).

With no authorizer, Kafka's AuthHelper.authorizedOperations allows every operation the resource type
supports (AclEntry.supportedOperations) and answers them as a bit field, bit n set for AclOperation
code n. A response field left unrequested keeps the schema default, Int.MinValue.
"""

from __future__ import annotations

from enum import IntEnum

NOT_REQUESTED = -(2**31)


class AclOperation(IntEnum):
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


def _bit_field(*operations: AclOperation) -> int:
    return sum(1 << op for op in set(operations))


Op = AclOperation
TOPIC_OPERATIONS = _bit_field(Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                              Op.ALTER_CONFIGS)
GROUP_OPERATIONS = _bit_field(Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
CLUSTER_OPERATIONS = _bit_field(Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                                Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE)


def operations_if(requested: bool, operations: int) -> int:
    return operations if requested else NOT_REQUESTED
