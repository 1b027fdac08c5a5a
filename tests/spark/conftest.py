"""Spark fixtures: one SparkSession per test module (local mode with task retries), Java checked first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

from pyspark.sql import SparkSession

from tests.spark.session import LOCAL_MASTER, build_session


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    session = build_session(LOCAL_MASTER, f"minikafka-{request.module.__name__}")
    yield session
    session.stop()
