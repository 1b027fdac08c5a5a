// Usage: node transaction_timeout.js <bootstrap> <topic> <transactionTimeoutMs> <deadlineMs>: opens a
// transaction with one record on partition 0 and leaves it open until the broker aborts it (its abort
// marker moves the partition's end offset past the record, polled until deadlineMs), then commits.
const { Kafka, logLevel } = require("kafkajs");

const describe = (error) => error && ({
  name: error.name,
  type: error.type,
  originalType: error.originalError && error.originalError.type,
  message: error.message,
});

async function main() {
  const [bootstrap, topic, timeoutMs, deadlineMs] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-txn-timeout", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({
    transactionalId: `kjs-${topic}`, idempotent: true, maxInFlightRequests: 1,
    transactionTimeout: Number(timeoutMs),
  });
  const admin = kafka.admin();
  await Promise.all([producer.connect(), admin.connect()]);
  const txn = await producer.transaction();
  await txn.send({ topic, messages: [{ partition: 0, value: "too-slow" }] });
  const started = Date.now();
  let endOffset = "0";
  while (Date.now() - started < Number(deadlineMs)) {
    const [offsets] = await admin.fetchTopicOffsets(topic);
    endOffset = offsets.high;
    if (Number(endOffset) >= 2) break; // the record and the abort marker
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  let commitError = null;
  try {
    await txn.commit();
  } catch (error) {
    commitError = describe(error);
  }
  await admin.disconnect();
  await producer.disconnect().catch(() => {});
  process.stdout.write(JSON.stringify({ endOffset, commitError }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
