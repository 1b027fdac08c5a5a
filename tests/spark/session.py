"""A local SparkSession with minikafka's data source registered, and the Java check before it."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

# Spark binds to the machine's external address unless told otherwise; workers must use this venv.
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

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
