// kafkajs admin edge cases and producer acks variants for minikafka's e2e tests.
// Usage: node admin_edges.js <bootstrap> <topic>; prints one JSON object on stdout.
const { Kafka, logLevel } = require("kafkajs");

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (error) {
    let cause = error;
    for (;;) {  // unwrap retry and aggregate wrappers down to the broker's answer
      if (cause.errors && cause.errors.length) cause = cause.errors[0];
      else if (cause.cause) cause = cause.cause;
      else break;
    }
    return { name: cause.name, type: cause.type || null };
  }
}

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-edges", brokers: [bootstrap], logLevel: logLevel.NOTHING,
    retry: { retries: 0 } });
  const admin = kafka.admin();
  await admin.connect();
  const result = {};
  result.cluster = await admin.describeCluster();
  result.created = await admin.createTopics({ topics: [{ topic, numPartitions: 1,
    configEntries: [{ name: "retention.ms", value: "3600000" }, { name: "cleanup.policy", value: "delete" }] }] });
  const configs = await admin.describeConfigs({ resources: [{ type: 2, name: topic,
    configNames: ["retention.ms", "segment.bytes"] }], includeSynonyms: false });
  result.configs = Object.fromEntries(configs.resources[0].configEntries.map((e) => [e.configName,
    { value: e.configValue, isDefault: e.isDefault, source: e.configSource }]));
  const brokerConfigs = await admin.describeConfigs({ resources: [{ type: 4, name: "1",
    configNames: ["num.partitions", "log.segment.bytes"] }], includeSynonyms: false });
  result.brokerConfigs = Object.fromEntries(brokerConfigs.resources[0].configEntries.map((e) => [e.configName,
    e.configValue]));
  result.invalidName = await errorOf(admin.createTopics({ topics: [{ topic: "bad name!", numPartitions: 1 }] }));
  result.deleteMissing = await errorOf(admin.deleteTopics({ topics: [topic + "-missing"], timeout: 5000 }));
  result.shrink = await errorOf(admin.createPartitions({ topicPartitions: [{ topic, count: 1 }] }));

  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  result.acks = {};
  for (const acks of [1, -1]) {
    const [answer] = await producer.send({ topic, acks, messages: [{ key: `acks${acks}`, value: `v${acks}`,
      headers: { a: "1", b: ["x", "y"] }, timestamp: "1700000000000" }] });
    result.acks[acks] = answer.baseOffset;
  }
  await producer.send({ topic, acks: 0, messages: [{ value: "acks0" }] });
  result.batch = await producer.sendBatch({ acks: -1, topicMessages: [
    { topic, messages: [{ value: "b1" }, { value: "b2" }] }] });
  result.unknownTopic = await errorOf(producer.send({ topic: topic + "-nope", acks: -1, messages: [{ value: "x" }] }));
  await producer.disconnect();
  result.offsets = await admin.fetchTopicOffsets(topic);
  result.byTimestampPastEnd = await admin.fetchTopicOffsetsByTimestamp(topic, 4102444800000);
  result.byTimestampStart = await admin.fetchTopicOffsetsByTimestamp(topic, 1600000000000);
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: "-1" }] });
  result.offsetsAfterDeleteAll = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  process.stdout.write(JSON.stringify(result));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
