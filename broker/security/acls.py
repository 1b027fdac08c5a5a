"""ACL bindings and filters with Kafka's codes, and the authorizer that judges requests by them.

The rules are Kafka's StandardAuthorizer's (StandardAuthorizerData.authorize):
- a super user (`super.users`, `User:alice;User:bob`) may do anything;
- the ACLs that apply to a resource are its LITERAL ones with the same name, the LITERAL `*` ones of its
  type, and the PREFIXED ones whose name starts its name; of those, the ones whose principal is the
  request's or `User:*` and whose host is the client's or `*`;
- a matching DENY for the operation (or ALL) refuses, whatever ALLOWs there are;
- an ALLOW for the operation, for ALL, or for one that implies it (READ, WRITE, DELETE and ALTER imply
  DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
- with no ACL at all on the resource, `allow.everyone.if.no.acl.found` decides (default false).
ACLs are kept in `acls.json` in the data directory (Kafka: the metadata log), rewritten atomically on
each change, so they survive a restart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import IntEnum
from pathlib import Path

from minikafka.broker.security.session import KafkaPrincipal, Session
from minikafka.storage.checkpoint import write_atomically

ACLS_FILE = "acls.json"
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
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
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# AclEntry.supportedOperations: what each resource type can be granted, and what KIP-430 reports.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE,
                                   Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS,
                                   Operation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS,
                                   Operation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                                     Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER,
                                     Operation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.DESCRIBE}),
    ResourceType.USER: frozenset({Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}),
}
_IMPLIED_BY = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}


_CODES: dict[type, frozenset[int]] = {
    enum: frozenset(member.value for member in enum) for enum in (ResourceType, PatternType, Operation, Permission)}


def _java_name(enum: type[IntEnum], code: int) -> str:
    """How Kafka prints the enum it decoded `code` into: a code it does not know is UNKNOWN."""
    return enum(code).name if code in _CODES[enum] else "UNKNOWN"


class InvalidAcl(ValueError):
    """A binding or filter Kafka refuses with INVALID_REQUEST."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def validate(self) -> None:
        """Kafka's checks and messages: AclApis.handleCreateAcls' on the broker first, then
        AclControlManager.validateNewAcl's."""
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if not self.resource_name:
            raise InvalidAcl("Invalid empty resource name")
        if (self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN)
                or self.resource_type not in _CODES[ResourceType]):
            raise InvalidAcl(f"Invalid resourceType {_java_name(ResourceType, self.resource_type)}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {_java_name(PatternType, self.pattern_type)}")
        if self.operation in (Operation.ANY, Operation.UNKNOWN) or self.operation not in _CODES[Operation]:
            raise InvalidAcl(f"Invalid operation {_java_name(Operation, self.operation)}")
        if self.permission not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(f"Invalid permissionType {_java_name(Permission, self.permission)}")
        try:
            KafkaPrincipal.parse(self.principal)
        except ValueError as exc:
            raise InvalidAcl(f"Could not parse principal from `{self.principal}` ({exc})") from None
        if self.host is None:
            raise InvalidAcl("Invalid null host")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A Describe/DeleteAcls filter: None and ANY match everything; MATCH matches what would apply to a name."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def validate(self) -> None:
        if self.resource_type == ResourceType.UNKNOWN or self.resource_type not in _CODES[ResourceType]:
            raise InvalidAcl(f"Invalid resourceType {_java_name(ResourceType, self.resource_type)}")
        if self.pattern_type == PatternType.UNKNOWN or self.pattern_type not in _CODES[PatternType]:
            raise InvalidAcl(f"Invalid patternType {_java_name(PatternType, self.pattern_type)}")
        if self.operation == Operation.UNKNOWN or self.operation not in _CODES[Operation]:
            raise InvalidAcl(f"Invalid operation {_java_name(Operation, self.operation)}")
        if self.permission == Permission.UNKNOWN or self.permission not in _CODES[Permission]:
            raise InvalidAcl(f"Invalid permissionType {_java_name(Permission, self.permission)}")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != Operation.ANY and self.operation != acl.operation:
            return False
        return self.permission == Permission.ANY or self.permission == acl.permission

    def _matches_pattern(self, acl: AclBinding) -> bool:
        name = self.resource_name
        if self.pattern_type == PatternType.MATCH:
            if name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (name, WILDCARD)
            return name.startswith(acl.resource_name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != acl.pattern_type:
            return False
        return name is None or name == acl.resource_name


def _parse_super_users(value: str) -> frozenset[str]:
    return frozenset(item.strip() for item in value.split(";") if item.strip())


class Authorizer:
    def __init__(self, data_dir: Path, super_users: str = "", allow_everyone_if_no_acl_found: bool = False) -> None:
        self._path = data_dir / ACLS_FILE
        self.super_users = _parse_super_users(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: list[AclBinding] = []
        if self._path.exists():
            self._acls = [AclBinding(**entry) for entry in json.loads(self._path.read_text()).get("acls", [])]

    @property
    def acls(self) -> list[AclBinding]:
        return list(self._acls)

    def add(self, bindings: Iterable[AclBinding]) -> None:
        new = [binding for binding in bindings if binding not in self._acls]
        if new:
            self._acls.extend(dict.fromkeys(new))
            self._save()

    def remove(self, bindings: Iterable[AclBinding]) -> None:
        gone = set(bindings)
        if gone:
            self._acls = [acl for acl in self._acls if acl not in gone]
            self._save()

    def reset(self) -> None:
        """A broker reset: no ACL (super.users and allow.everyone.if.no.acl.found are static and stay)."""
        self._acls = []
        self._path.unlink(missing_ok=True)

    def _save(self) -> None:
        document = {"acls": [asdict(acl) for acl in self._acls]}
        write_atomically(self._path, (json.dumps(document, indent=1) + "\n").encode())

    def authorize(self, session: Session, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        principal = str(session.principal)
        if principal in self.super_users:
            return True
        found_resource_acls = False
        allowed = False
        for acl in self._acls:
            if acl.resource_type != resource_type or not _applies_to(acl, name):
                continue
            found_resource_acls = True
            if acl.principal not in (principal, f"{session.principal.principal_type}:{WILDCARD}"):
                continue
            if acl.host not in (session.client_host, WILDCARD):
                continue
            if acl.permission == Permission.DENY:
                if acl.operation in (Operation.ALL, operation):
                    return False
            elif acl.operation in (Operation.ALL, operation) or acl.operation in _IMPLIED_BY.get(operation, ()):
                allowed = True
        if allowed:
            return True
        return not found_resource_acls and self.allow_everyone_if_no_acl_found

    def authorize_any(self, session: Session, operation: Operation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType, in the simple form used here: some resource of the type could be
        acted on (an ALLOW for the principal on any such resource, and no DENY on a `*` literal)."""
        principal = str(session.principal)
        if principal in self.super_users:
            return True
        for acl in self._acls:
            if (acl.resource_type == resource_type and acl.permission == Permission.DENY
                    and acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD
                    and acl.operation in (Operation.ALL, operation)
                    and acl.principal in (principal, f"{session.principal.principal_type}:{WILDCARD}")):
                return False
        for acl in self._acls:
            if (acl.resource_type == resource_type and acl.permission == Permission.ALLOW
                    and acl.operation in (Operation.ALL, operation)
                    and acl.principal in (principal, f"{session.principal.principal_type}:{WILDCARD}")
                    and acl.host in (session.client_host, WILDCARD)):
                return True
        return self.allow_everyone_if_no_acl_found and not any(
            acl.resource_type == resource_type for acl in self._acls)

    def authorized_operations(self, session: Session, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: bit n for each supported operation n this session may perform."""
        return sum(1 << operation for operation in SUPPORTED_OPERATIONS.get(resource_type, ())
                   if self.authorize(session, operation, resource_type, name))


def _applies_to(acl: AclBinding, name: str) -> bool:
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name in (name, WILDCARD)
    return name.startswith(acl.resource_name)
