"""Spark fixtures: one SparkSession per test module (local mode with task retries), Java checked first."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator

import pytest

# Spark binds to the machine's external address unless told otherwise; workers must use this venv.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

pytest.importorskip("pyspark", reason="the spark extra is not installed: pip install -e '.[dev,spark]'")

from minikafka.pipeline import MiniKafkaDataSource
from pyspark.sql import SparkSession

# `local[2,4]`: two cores, and a failed task is retried up to 4 times, as on a cluster.
LOCAL_MASTER = "local[2,4]"


def require_java() -> None:
    if shutil.which("java") is None:
        message = "Spark needs Java 17 (Debian: apt-get install -y openjdk-17-jre-headless)"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs Java: a missing one is a setup bug, not a skip
        pytest.skip(message)


def build_session(master: str, app_name: str, **conf: str) -> SparkSession:
    require_java()
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.pyspark.python", sys.executable))
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(MiniKafkaDataSource)
    return session


@pytest.fixture(scope="module")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    session = build_session(LOCAL_MASTER, f"minikafka-{request.module.__name__}")
    yield session
    session.stop()
