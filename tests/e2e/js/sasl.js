// kafkajs over SASL for minikafka's e2e tests: create a topic, produce, read the offsets back.
// Usage: node sasl.js <bootstrap> <topic> <mechanism> <user> <password> [<ca.pem> for SASL_SSL]; one JSON object on stdout
// ({"error": ...} with the error's name when the broker refuses the login).
const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, mechanism, username, password, caPath] = process.argv.slice(2);
  const ssl = caPath ? { ca: [fs.readFileSync(caPath, "utf-8")], rejectUnauthorized: true } : undefined;
  const kafka = new Kafka({ clientId: "kafkajs-sasl", brokers: [bootstrap], logLevel: logLevel.NOTHING,
    sasl: { mechanism, username, password }, ssl, retry: { retries: 0 } });
  const admin = kafka.admin();
  const result = {};
  try {
    await admin.connect();
  } catch (error) {
    process.stdout.write(JSON.stringify({ refused: error.name, message: String(error.message) }));
    return;
  }
  result.created = await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const sent = await producer.send({ topic, acks: -1,
    messages: Array.from({ length: 3 }, (_, i) => ({ key: `k${i}`, value: `kafkajs-${i}` })) });
  result.baseOffset = sent[0].baseOffset;
  await producer.disconnect();
  result.offsets = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  process.stdout.write(JSON.stringify(result));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
