"""The schema registry behind a broker listener's security: HTTP basic auth with the listener's SASL users
(PLAIN and SCRAM), HTTPS with its key store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from minikafka.testing import Broker

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
RECORD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})


def _sasl_config(listener: str) -> dict[str, str]:
    return {"listeners": f"{listener}://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            f"listener.name.{listener.lower()}.plain.sasl.jaas.config": JAAS,
            "minikafka.scram.users": "carol:carol-secret", "schema.registry.listener.name": listener}


def test_basic_auth_with_the_listeners_plain_and_scram_users() -> None:
    with Broker(_sasl_config("SASL_PLAINTEXT"), schema_registry=True) as broker:
        url = broker.schema_registry_url
        assert url is not None and url.startswith("http://")
        with pytest.raises(SchemaRegistryError) as anonymous:
            SchemaRegistryClient({"url": url}).get_subjects()
        assert (anonymous.value.http_status_code, anonymous.value.error_code) == (401, 401)
        with pytest.raises(SchemaRegistryError) as wrong:
            SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:nope"}).get_subjects()
        assert wrong.value.http_status_code == 401
        alice = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:alice-secret"})
        schema_id = alice.register_schema("r-value", Schema(RECORD, "AVRO"))
        carol = SchemaRegistryClient({"url": url, "basic.auth.user.info": "carol:carol-secret"})
        assert carol.get_schema(schema_id).schema_str == RECORD


def test_https_with_the_listeners_key_store(tmp_path: Path) -> None:
    from minikafka.testing.certs import generate_certificates

    certs = generate_certificates(tmp_path / "certs")
    config = {**_sasl_config("SASL_SSL"), **certs.broker_properties("SASL_SSL")}
    with Broker(config, schema_registry=True) as broker:
        url = broker.schema_registry_url
        assert url is not None and url.startswith("https://")
        client = SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca_cert),
                                       "basic.auth.user.info": "alice:alice-secret"})
        schema_id = client.register_schema("r-value", Schema(RECORD, "AVRO"))
        assert client.get_latest_version("r-value").schema_id == schema_id
        with pytest.raises(SchemaRegistryError) as anonymous:
            SchemaRegistryClient({"url": url, "ssl.ca.location": str(certs.ca_cert)}).get_subjects()
        assert anonymous.value.http_status_code == 401


def test_an_unknown_listener_name_stops_the_start() -> None:
    from minikafka.testing.broker import BrokerError

    with pytest.raises(BrokerError, match=r"schema\.registry\.listener\.name"), \
            Broker({"schema.registry.listener.name": "NOPE"}, schema_registry=True):
        pass
