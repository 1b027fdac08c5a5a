"""The control plane steers the broker (faults, clock, node stops), so it stays on loopback unless it has a
token: `admin.listener.token` makes every request but the inspector's static page present it, as a bearer
header or (for the inspector's event stream) an access_token query parameter; without a token the listener
refuses to bind any other address."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from minikafka.broker.config.config import ConfigError, build_config
from minikafka.testing import Broker

TOKEN = "s3cret-token"


@pytest.fixture
def guarded() -> Iterator[Broker]:
    with Broker({"admin.listener.port": "0", "admin.listener.token": TOKEN}) as broker:
        yield broker


def _status(url: str, token: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_requests_without_the_token_are_refused(guarded: Broker) -> None:
    base = guarded.admin_url
    assert base is not None
    assert _status(f"{base}/state") == 401
    assert _status(f"{base}/faults", "wrong-token") == 401
    assert _status(f"{base}/state", TOKEN) == 200
    assert _status(f"{base}/trace?limit=1&access_token={TOKEN}") == 200
    assert _status(f"{base}/inspector") == 200  # the page holds no data; what it fetches needs the token


def test_the_cluster_tool_sends_the_token(guarded: Broker) -> None:
    command = [sys.executable, "-m", "minikafka.broker", "cluster", "--admin-url", str(guarded.admin_url), "describe"]
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 1 and "token" in refused.stderr, refused
    described = subprocess.run([*command[:-1], "--admin-token", TOKEN, "describe"], capture_output=True, text=True,
                               timeout=60, check=False)
    assert described.returncode == 0 and "Controller:" in described.stdout, described


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "broker.example"])
def test_a_non_loopback_admin_listener_needs_a_token(tmp_path: Path, host: str) -> None:
    overrides = ["admin.listener.port=0", f"admin.listener.host={host}"]
    with pytest.raises(ConfigError, match=r"admin\.listener\.token"):
        build_config(overrides=overrides, port=0, data_dir=tmp_path)
    config = build_config(overrides=[*overrides, f"admin.listener.token={TOKEN}"], port=0, data_dir=tmp_path)
    assert config.admin_token == TOKEN


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "127.0.0.2"])
def test_loopback_needs_no_token(tmp_path: Path, host: str) -> None:
    config = build_config(overrides=["admin.listener.port=0", f"admin.listener.host={host}"], port=0, data_dir=tmp_path)
    assert config.admin_token is None


def test_serve_refuses_an_unguarded_public_admin_listener_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "minikafka.broker", "serve", "--port", "0", "--data-dir",
                           str(tmp_path / "data"), "--admin-port", "0", "--override", "admin.listener.host=0.0.0.0"],
                          capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done
    [line] = done.stderr.strip().splitlines()
    assert "admin.listener.token" in line
