"""The "minikafka" Spark data source: Kafka topics as DataFrames, read and written like Spark's Kafka connector."""

from __future__ import annotations

from minikafka.pipeline.options import SinkOptions, SourceOptions
from minikafka.pipeline.reading import SPARK_SCHEMA
from minikafka.pipeline.sink import KafkaBatchWriter, KafkaStreamWriter
from minikafka.pipeline.source import KafkaBatchReader, KafkaStreamReader
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType


class MiniKafkaDataSource(DataSource):
    """`spark.read/readStream.format("minikafka")` and `df.write/writeStream.format("minikafka")`.

    Options are parsed when Spark asks for a reader or writer, so a bad option fails the query at
    planning time on the driver with a message naming it.
    """

    @classmethod
    def name(cls) -> str:
        return "minikafka"

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaBatchWriter(SinkOptions.parse(self.options, streaming=False), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KafkaStreamWriter(SinkOptions.parse(self.options, streaming=True), schema)


def register(spark: SparkSession) -> None:
    """`spark.dataSource.register(MiniKafkaDataSource)`, for symmetry with the docs."""
    spark.dataSource.register(MiniKafkaDataSource)
