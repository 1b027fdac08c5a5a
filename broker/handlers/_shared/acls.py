"""What the three ACL APIs (CreateAcls, DescribeAcls, DeleteAcls) share."""

from __future__ import annotations

from typing import Any

from minikafka.broker.security.acls import AclFilter

# Kafka's answer when no authorizer is configured (SECURITY_DISABLED).
NO_AUTHORIZER = "No Authorizer is configured."
# DescribeAcls words it differently (Kafka's AclApis.handleDescribeAcls).
NO_AUTHORIZER_ON_BROKER = "No Authorizer is configured on the broker"



def acl_filter(entry: Any) -> AclFilter:
    return AclFilter(entry.resource_type_filter, entry.resource_name_filter, entry.pattern_type_filter,
                     entry.principal_filter, entry.host_filter, entry.operation, entry.permission_type)
