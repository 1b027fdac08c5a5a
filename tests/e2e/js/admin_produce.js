// kafkajs admin and producer scenario for minikafka's e2e tests.
// Usage: node admin_produce.js <bootstrap> <topic>; prints one JSON object on stdout.
const { Kafka, logLevel, CompressionTypes } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-e2e", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const result = {};
  result.created = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
  result.createdAgain = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
  result.listed = (await admin.listTopics()).includes(topic);
  await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] });
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  result.partitions = metadata.topics[0].partitions.length;
  const configs = await admin.describeConfigs({ resources: [{ type: 2, name: topic }], includeSynonyms: false });
  result.retentionMs = configs.resources[0].configEntries.find((e) => e.configName === "retention.ms").configValue;

  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const sent = await producer.send({
    topic,
    acks: -1,
    messages: [
      { partition: 0, key: "k1", value: "v1", headers: { h: "1" }, timestamp: "1600000000000" },
      { partition: 0, key: null, value: "v2", timestamp: "1600000001000" },
      { partition: 0, key: "k3", value: null, timestamp: "1600000002000" },
    ],
  });
  result.baseOffset = sent[0].baseOffset;
  await producer.send({ topic, compression: CompressionTypes.GZIP,
    messages: [{ partition: 1, value: "gz-1" }, { partition: 1, value: "gz-2" }] });
  await producer.disconnect();

  result.offsets = await admin.fetchTopicOffsets(topic);
  result.byTimestamp = await admin.fetchTopicOffsetsByTimestamp(topic, 1600000000500);
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: "1" }] });
  result.offsetsAfterDelete = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  process.stdout.write(JSON.stringify(result));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
