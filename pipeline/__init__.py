"""minikafka.pipeline: a PySpark data source ("minikafka") for Kafka-compatible brokers with an exactly-once sink.

    from minikafka.pipeline import MiniKafkaDataSource
    spark.dataSource.register(MiniKafkaDataSource)
    spark.readStream.format("minikafka").option("kafka.bootstrap.servers", "127.0.0.1:9092") ...

Needs the `spark` extra (pyspark, pyarrow, confluent-kafka); see docs/spark.md.
"""

from minikafka.pipeline.datasource import MiniKafkaDataSource, register

__all__ = ["MiniKafkaDataSource", "register"]
