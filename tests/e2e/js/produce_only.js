// Usage: node produce_only.js <bootstrap> <topic>; produces with acks 1 and -1 and a batch, prints base offsets.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-produce", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
  await admin.disconnect();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const baseOffsets = [];
  for (const acks of [1, -1]) {
    const [answer] = await producer.send({ topic, acks, messages: [{ key: `acks${acks}`, value: `v${acks}`,
      headers: { a: "1", b: ["x", "y"] }, timestamp: "1700000000000" }] });
    baseOffsets.push(answer.baseOffset);
  }
  const [batch] = await producer.sendBatch({ acks: -1, topicMessages: [
    { topic, messages: [{ value: "b1" }, { value: "b2" }] }] });
  baseOffsets.push(batch.baseOffset);
  await producer.disconnect();
  process.stdout.write(JSON.stringify({ baseOffsets }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
