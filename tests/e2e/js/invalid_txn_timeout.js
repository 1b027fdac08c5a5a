// Usage: node invalid_txn_timeout.js <bootstrap> <transactionalId> <transactionTimeoutMs>: starts a
// transaction, which makes kafkajs send InitProducerId with the timeout; prints how that failed.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, transactionalId, timeoutMs] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-bad-timeout", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({
    transactionalId, idempotent: true, maxInFlightRequests: 1, transactionTimeout: Number(timeoutMs),
  });
  await producer.connect();
  let failure = null;
  try {
    const txn = await producer.transaction();
    await txn.abort();
  } catch (error) {
    failure = { name: error.name, type: error.type, originalType: error.originalError && error.originalError.type };
  }
  await producer.disconnect();
  process.stdout.write(JSON.stringify({ failure }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
