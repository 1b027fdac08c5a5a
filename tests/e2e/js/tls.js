// kafkajs over TLS for minikafka's e2e tests: create a topic, produce, read the offsets back.
// Usage: node tls.js <bootstrap> <topic> <ca.pem> [<client cert.pem> <client key.pem>]; one JSON object on stdout.
const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, caPath, certPath, keyPath] = process.argv.slice(2);
  const ssl = { ca: [fs.readFileSync(caPath, "utf-8")], rejectUnauthorized: true };
  if (certPath) {
    ssl.cert = fs.readFileSync(certPath, "utf-8");
    ssl.key = fs.readFileSync(keyPath, "utf-8");
  }
  const kafka = new Kafka({ clientId: "kafkajs-tls", brokers: [bootstrap], ssl, logLevel: logLevel.NOTHING,
    retry: { retries: 2 } });
  const admin = kafka.admin();
  await admin.connect();
  const result = {};
  result.created = await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const sent = await producer.send({ topic, acks: -1,
    messages: Array.from({ length: 5 }, (_, i) => ({ key: `k${i}`, value: `kafkajs-${i}` })) });
  result.baseOffset = sent[0].baseOffset;
  await producer.disconnect();
  result.offsets = await admin.fetchTopicOffsets(topic);
  result.brokers = (await admin.describeCluster()).brokers;
  await admin.disconnect();
  process.stdout.write(JSON.stringify(result));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
