"""The data source on a real (local) Spark standalone cluster: master + worker on 127.0.0.1, spark-submit.

Executors are separate JVMs started by the worker, with their own Python workers: this checks that the
readers and writers pickle and run away from the driver, as on a real cluster.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from minikafka.testing import Broker

from tests.support.names import unique_topic

from .helpers import create_topics, produce, read_topic
from .session import require_java

pytestmark = pytest.mark.spark

SPARK_HOME = Path(pyspark.__file__).parent
START_DEADLINE_S = 90.0


def spark_env() -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_NO_DAEMONIZE": "1"}


def start_daemon(args: list[str], log_path: Path, ready: str) -> tuple[subprocess.Popen[bytes], re.Match[str]]:
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], stdout=log,
                                   stderr=subprocess.STDOUT, env=spark_env(), start_new_session=True)
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        match = re.search(ready, log_path.read_text(errors="replace"))
        if match:
            return process, match
        if process.poll() is not None:
            break
        time.sleep(0.2)
    stop_daemon(process)
    pytest.skip(f"{args[0]} did not start within {START_DEADLINE_S}s: {log_path.read_text()[-2000:]}")


def stop_daemon(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(master URL, the worker's work dir)."""
    require_java()
    logs = tmp_path_factory.mktemp("standalone")
    master, match = start_daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                                  "--webui-port", "0"], logs / "master.log",
                                 r"Starting Spark master at (spark://127\.0\.0\.1:\d+)")
    url = match.group(1)
    try:
        worker, _ = start_daemon(["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                                  "--webui-port", "0", "--cores", "2", "--memory", "2g", "--work-dir",
                                  str(logs / "work"), url], logs / "worker.log", r"Successfully registered with master")
        try:
            yield url, logs / "work"
        finally:
            stop_daemon(worker)
    finally:
        stop_daemon(master)


def test_spark_submit_on_standalone_cluster(cluster: tuple[str, Path], broker: Broker, tmp_path: Path) -> None:
    master_url, work_dir = cluster
    source, batch_sink, stream_sink = (unique_topic("cl-a"), unique_topic("cl-batch"), unique_topic("cl-stream"))
    create_topics(broker.bootstrap_servers, **{source: 3, batch_sink: 2, stream_sink: 2})
    produce(broker.bootstrap_servers, source, [(f"k{i}".encode(), f"value-{i:04d}".encode()) for i in range(600)],
            headers=[("origin", b"test")])
    job = Path(__file__).with_name("cluster_job.py")
    result = subprocess.run(
        [str(SPARK_HOME / "bin" / "spark-submit"), "--master", master_url, "--conf", "spark.ui.enabled=false",
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.executor.memory=512m",
         "--conf", f"spark.pyspark.python={sys.executable}", "--conf", f"spark.pyspark.driver.python={sys.executable}",
         "--conf", "spark.sql.shuffle.partitions=2",
         str(job), broker.bootstrap_servers, source, batch_sink, stream_sink, str(tmp_path / "checkpoint")],
        env=spark_env(), capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    assert "streaming batches with data: [0, 1, 2]" in result.stdout, result.stdout[-2000:]

    inputs = read_topic(broker.bootstrap_servers, source)
    batch_out = read_topic(broker.bootstrap_servers, batch_sink)
    stream_out = read_topic(broker.bootstrap_servers, stream_sink)
    expected = sorted((r.key, r.value, r.headers) for r in inputs)
    assert sorted((r.key, r.value[::-1] if r.value else None, r.headers) for r in batch_out) == expected
    assert sorted((r.key, r.value, r.headers) for r in stream_out) == expected
    # The tasks ran in executors the worker launched (one directory per executor), not in the driver.
    assert list(work_dir.glob("app-*/*/stderr")), "the worker launched no executor"
