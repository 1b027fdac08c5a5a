"""A spark-submit job for the standalone-cluster test: a batch copy and an AvailableNow streaming copy.

    spark-submit --master spark://127.0.0.1:7077 tests/spark/cluster_job.py BOOTSTRAP SOURCE BATCH_SINK \
        STREAM_SINK CHECKPOINT
"""

from __future__ import annotations

import sys

from minikafka.pipeline import MiniKafkaDataSource
from pyspark.sql import SparkSession


def main(bootstrap: str, source: str, batch_sink: str, stream_sink: str, checkpoint: str) -> None:
    spark = SparkSession.builder.appName("minikafka-cluster-job").getOrCreate()
    spark.dataSource.register(MiniKafkaDataSource)
    read = spark.read.format("minikafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
    (read.load().selectExpr("key", "reverse(value) AS value", "headers")
     .write.format("minikafka").option("kafka.bootstrap.servers", bootstrap).option("topic", batch_sink)
     .mode("append").save())
    stream = (spark.readStream.format("minikafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "200")
              .load())
    query = (stream.selectExpr("key", "value", "headers").writeStream.format("minikafka")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", stream_sink)
             .option("sink.transactionalIdPrefix", f"cluster-{stream_sink}")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    batches = [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0]
    print(f"streaming batches with data: {batches}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
