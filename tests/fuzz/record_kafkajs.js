// Usage: node record_kafkajs.js <bootstrap> <prefix>: every API kafkajs speaks, for the fuzz corpus.
// Steps that fail still sent their requests, which is all the recorder needs, so errors are only noted.
const path = require("path");
const { Kafka, logLevel, CompressionTypes } = require(path.resolve(__dirname, "../e2e/js/node_modules/kafkajs"));

async function step(name, fn, failures) {
  try {
    await fn();
  } catch (error) {
    failures.push(`${name}: ${error && error.message}`);
  }
}

async function consumeSome(kafka, topic, groupId, readUncommitted, count) {
  const consumer = kafka.consumer({ groupId, readUncommitted, maxWaitTimeInMs: 100, sessionTimeout: 10000,
                                    heartbeatInterval: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let seen = 0;
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 10000);
    consumer.run({ eachMessage: async () => { seen += 1; if (seen >= count) { clearTimeout(timer); resolve(); } } });
  });
  await new Promise((resolve) => setTimeout(resolve, 1200));  // let a heartbeat and an offset commit go out
  await consumer.disconnect();
}

async function main() {
  const [bootstrap, prefix] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-fuzz", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const failures = [];
  const topic = `${prefix}-a`;
  const other = `${prefix}-b`;
  const group = `${prefix}-g`;
  const admin = kafka.admin();
  await admin.connect();
  await step("createTopics", () => admin.createTopics({ topics: [
    { topic, numPartitions: 2 }, { topic: other, numPartitions: 1, configEntries: [{ name: "cleanup.policy", value: "delete" }] },
  ] }), failures);
  await step("createPartitions", () => admin.createPartitions({ topicPartitions: [{ topic: other, count: 2 }] }), failures);
  await step("describeConfigs", () => admin.describeConfigs({ includeSynonyms: false,
    resources: [{ type: 2, name: topic }, { type: 4, name: "1" }] }), failures);
  await step("alterConfigs", () => admin.alterConfigs({ validateOnly: false,
    resources: [{ type: 2, name: other, configEntries: [{ name: "retention.ms", value: "600000" }] }] }), failures);
  await step("describeCluster", () => admin.describeCluster(), failures);
  await step("fetchTopicMetadata", () => admin.fetchTopicMetadata({ topics: [topic] }), failures);

  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  await step("produce", () => producer.send({ topic, acks: -1, messages: [
    { key: "k1", value: "v1", headers: { h: "x" } }, { value: "v2" }, { key: "k3", value: null }] }), failures);
  await step("produceGzip", () => producer.send({ topic: other, compression: CompressionTypes.GZIP, acks: 1,
    messages: [{ value: "g1" }, { value: "g2" }] }), failures);
  await producer.disconnect();

  const idempotent = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await idempotent.connect();
  await step("idempotent", () => idempotent.send({ topic, messages: [{ value: "i1" }, { value: "i2" }] }), failures);
  await idempotent.disconnect();

  const transactional = kafka.producer({ transactionalId: `${prefix}-txn`, idempotent: true, maxInFlightRequests: 1 });
  await transactional.connect();
  await step("commitTxn", async () => {
    const txn = await transactional.transaction();
    await txn.send({ topic, messages: [{ value: "t1" }] });
    await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: "1" }] }] });
    await txn.commit();
  }, failures);
  await step("abortTxn", async () => {
    const txn = await transactional.transaction();
    await txn.send({ topic, messages: [{ value: "t2" }] });
    await txn.abort();
  }, failures);
  await transactional.disconnect();

  await step("consumeCommitted", () => consumeSome(kafka, topic, group, false, 3), failures);
  await step("consumeUncommitted", () => consumeSome(kafka, topic, `${group}-u`, true, 3), failures);
  await step("fetchTopicOffsets", () => admin.fetchTopicOffsets(topic), failures);
  await step("fetchTopicOffsetsByTimestamp", () => admin.fetchTopicOffsetsByTimestamp(topic, Date.now() - 60000),
             failures);
  await step("fetchOffsets", () => admin.fetchOffsets({ groupId: group, topics: [topic] }), failures);
  await step("setOffsets", () => admin.setOffsets({ groupId: group, topic, partitions: [{ partition: 0, offset: "0" }] }),
             failures);
  await step("listGroups", () => admin.listGroups(), failures);
  await step("describeGroups", () => admin.describeGroups([group, `${group}-u`]), failures);
  await step("deleteTopicRecords", () => admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: "1" }] }),
             failures);
  await step("deleteGroups", () => admin.deleteGroups([`${group}-u`]), failures);
  await step("deleteTopics", () => admin.deleteTopics({ topics: [other] }), failures);
  await admin.disconnect();
  process.stdout.write(JSON.stringify({ done: true, failures }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
