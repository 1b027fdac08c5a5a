// Usage: node transactions_atomic.js <bootstrap> <first> <second>: one transaction over every
// partition of both topics (committed), then a second one over the same partitions (aborted).
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, first, second] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-atomic", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ transactionalId: `kjs-${first}`, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const records = (prefix) => [
    { topic: first, messages: [0, 1, 2, 3, 4, 5].map((i) => ({ partition: i % 3, value: `${prefix}-x${i}` })) },
    { topic: second, messages: [0, 1, 2, 3, 4, 5].map((i) => ({ partition: i % 2, value: `${prefix}-y${i}` })) },
  ];
  let txn = await producer.transaction();
  await txn.sendBatch({ topicMessages: records("c") });
  await txn.commit();
  txn = await producer.transaction();
  await txn.sendBatch({ topicMessages: records("a") }); // resolves once the records are in the log
  await txn.abort();
  await producer.disconnect();
  process.stdout.write(JSON.stringify({ done: true }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
