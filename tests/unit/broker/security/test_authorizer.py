"""The authorizer's rules, as Kafka's StandardAuthorizer applies them."""

from __future__ import annotations

from pathlib import Path

import pytest
from minikafka.broker.security.acls import (
    AclBinding,
    AclFilter,
    Authorizer,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from minikafka.broker.security.session import KafkaPrincipal, Session

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def _session(user: str = "alice", host: str = "10.0.0.1") -> Session:
    session = Session("SASL_PLAINTEXT", "SASL_PLAINTEXT", host)
    session.principal = KafkaPrincipal("User", user)
    return session


def _acl(name: str, operation: Operation, permission: Permission = ALLOW, *, resource: ResourceType = T,
         pattern: PatternType = LIT, principal: str = "User:alice", host: str = "*") -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


@pytest.fixture
def authorizer(tmp_path: Path) -> Authorizer:
    return Authorizer(tmp_path, "User:admin;User:ops")


def test_no_acl_means_denied_unless_allow_everyone_is_set(tmp_path: Path) -> None:
    assert not Authorizer(tmp_path).authorize(_session(), Operation.READ, T, "orders")
    assert Authorizer(tmp_path, "", allow_everyone_if_no_acl_found=True).authorize(_session(), Operation.READ, T,
                                                                                   "orders")


def test_allow_everyone_does_not_apply_once_the_resource_has_any_acl(tmp_path: Path) -> None:
    authorizer = Authorizer(tmp_path, "", allow_everyone_if_no_acl_found=True)
    authorizer.add([_acl("orders", Operation.READ, principal="User:bob")])
    assert not authorizer.authorize(_session(), Operation.READ, T, "orders")
    assert authorizer.authorize(_session(), Operation.READ, T, "payments")


def test_super_users_may_do_anything(authorizer: Authorizer) -> None:
    authorizer.add([_acl("*", Operation.ALL, DENY, principal="User:*")])
    assert authorizer.authorize(_session("ops"), Operation.DELETE, T, "orders")
    assert not authorizer.authorize(_session(), Operation.READ, T, "orders")


def test_literal_wildcard_and_prefixed_patterns(authorizer: Authorizer) -> None:
    authorizer.add([_acl("orders", Operation.READ), _acl("pay-", Operation.WRITE, pattern=PRE),
                    _acl("*", Operation.DESCRIBE, resource=G)])
    session = _session()
    assert authorizer.authorize(session, Operation.READ, T, "orders")
    assert not authorizer.authorize(session, Operation.READ, T, "orders-2")
    assert authorizer.authorize(session, Operation.WRITE, T, "pay-eu")
    assert not authorizer.authorize(session, Operation.WRITE, T, "payments")
    assert authorizer.authorize(session, Operation.DESCRIBE, G, "any-group")


def test_deny_beats_allow(authorizer: Authorizer) -> None:
    authorizer.add([_acl("orders", Operation.ALL), _acl("orders", Operation.WRITE, DENY)])
    assert authorizer.authorize(_session(), Operation.READ, T, "orders")
    assert not authorizer.authorize(_session(), Operation.WRITE, T, "orders")


def test_implied_operations(authorizer: Authorizer) -> None:
    authorizer.add([_acl("orders", Operation.WRITE), _acl("audit", Operation.ALTER_CONFIGS)])
    assert authorizer.authorize(_session(), Operation.DESCRIBE, T, "orders")
    assert not authorizer.authorize(_session(), Operation.READ, T, "orders")
    assert authorizer.authorize(_session(), Operation.DESCRIBE_CONFIGS, T, "audit")
    assert not authorizer.authorize(_session(), Operation.DESCRIBE, T, "audit")


def test_principal_and_host_matching(authorizer: Authorizer) -> None:
    authorizer.add([_acl("orders", Operation.READ, principal="User:*", host="10.0.0.1")])
    assert authorizer.authorize(_session("bob"), Operation.READ, T, "orders")
    assert not authorizer.authorize(_session("bob", host="10.0.0.2"), Operation.READ, T, "orders")


def test_authorized_operations_bit_field(authorizer: Authorizer) -> None:
    authorizer.add([_acl("orders", Operation.READ)])
    expected = (1 << Operation.READ) | (1 << Operation.DESCRIBE)
    assert authorizer.authorized_operations(_session(), T, "orders") == expected


def test_acls_survive_a_reload(tmp_path: Path) -> None:
    Authorizer(tmp_path).add([_acl("orders", Operation.READ)])
    assert Authorizer(tmp_path).acls == [_acl("orders", Operation.READ)]


@pytest.mark.parametrize(("binding", "message"), [
    (_acl("orders", Operation.ANY), "Invalid operation"),
    (_acl("orders", Operation.READ, Permission.ANY), "Invalid permissionType"),
    (_acl("orders", Operation.READ, pattern=PatternType.MATCH), "Invalid patternType"),
    (_acl("other", Operation.ALTER, resource=C), "only valid name for the CLUSTER"),
    (_acl("orders", Operation.READ, principal="alice"), "Could not parse principal"),
])
def test_invalid_bindings(binding: AclBinding, message: str) -> None:
    with pytest.raises(InvalidAcl, match=message):
        binding.validate()


def test_filters_any_match_literal_and_prefixed() -> None:
    literal, prefixed, wildcard = (_acl("orders", Operation.READ), _acl("ord", Operation.READ, pattern=PRE),
                                   _acl("*", Operation.READ))
    match = AclFilter(T, "orders", PatternType.MATCH, None, None, Operation.ANY, Permission.ANY)
    assert [match.matches(a) for a in (literal, prefixed, wildcard)] == [True, True, True]
    exact = AclFilter(T, "orders", PatternType.ANY, None, None, Operation.ANY, Permission.ANY)
    assert [exact.matches(a) for a in (literal, prefixed, wildcard)] == [True, False, False]
    prefixed_only = AclFilter(ResourceType.ANY, None, PRE, "User:alice", None, Operation.READ, ALLOW)
    assert [prefixed_only.matches(a) for a in (literal, prefixed, wildcard)] == [False, True, False]
