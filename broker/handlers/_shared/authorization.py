"""Authorized operations as a Kafka broker without an authorizer reports them (KIP-430).

With no authorizer, Kafka's AuthHelper.authorizedOperations allows every operation the resource type
supports (AclEntry.supportedOperations, broker/security/acls.py) and answers them as a bit field, bit n
set for AclOperation code n. A response field left unrequested keeps the schema default, Int.MinValue.
With an authorizer, Metadata's topic operations come from the ACLs (broker/security/api_authorization.py).
"""

from __future__ import annotations

from minikafka.broker.security.acls import SUPPORTED_OPERATIONS, ResourceType

NOT_REQUESTED = -(2**31)


def _bit_field(resource_type: ResourceType) -> int:
    return sum(1 << operation for operation in SUPPORTED_OPERATIONS[resource_type])


TOPIC_OPERATIONS = _bit_field(ResourceType.TOPIC)
GROUP_OPERATIONS = _bit_field(ResourceType.GROUP)
CLUSTER_OPERATIONS = _bit_field(ResourceType.CLUSTER)


def operations_if(requested: bool, operations: int) -> int:
    return operations if requested else NOT_REQUESTED
