"""The streaming query of the exactly-once tests: topic A -> Spark -> topic B through the minikafka sink.

Each output record carries its input coordinates in a header `src` = "partition:offset", so a test can
check that every input record is in B exactly once. Run as a script (`python -m tests.spark.copy_job`)
it is the driver process a test kills with -9.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery


def start_copy_query(spark: SparkSession, *, bootstrap: str, source: str, sink: str, checkpoint: str, prefix: str,
                     mode: str = "task", max_offsets: int = 1000, failpoints: list[dict] | None = None
                     ) -> StreamingQuery:
    stream = (spark.readStream.format("minikafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(max_offsets)).load())
    transformed = stream.selectExpr(
        "key",
        "upper(CAST(value AS STRING)) AS value",
        "array(named_struct('key', 'src', 'value', CAST(concat_ws(':', partition, offset) AS BINARY))) AS headers")
    return (transformed.writeStream.format("minikafka").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", sink).option("sink.mode", mode).option("sink.transactionalIdPrefix", prefix)
            .option("test.failpoints", json.dumps(failpoints or []))
            .option("checkpointLocation", checkpoint).start())


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "source", "sink", "checkpoint", "prefix", "mode", "failpoints"):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args()
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from tests.spark.session import LOCAL_MASTER, build_session

    spark = build_session(LOCAL_MASTER, "minikafka-copy-job")
    query = start_copy_query(spark, bootstrap=args.bootstrap, source=args.source, sink=args.sink,
                             checkpoint=args.checkpoint, prefix=args.prefix, mode=args.mode,
                             failpoints=json.loads(args.failpoints))
    query.processAllAvailable()
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
