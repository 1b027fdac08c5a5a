// Usage: node transactions.js <bootstrap> <topic> <group>: commit (with offsets), abort, zombie fencing.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, group] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-txn", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const transactionalId = `kjs-${topic}`;
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();

  let txn = await producer.transaction();
  await txn.send({ topic, messages: [{ partition: 0, value: "committed" }] });
  await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: "3" }] }] });
  await txn.commit();

  txn = await producer.transaction();
  await txn.send({ topic, messages: [{ partition: 0, value: "aborted" }] });
  await txn.abort();

  const zombieTxn = await producer.transaction();
  await zombieTxn.send({ topic, messages: [{ partition: 0, value: "zombie" }] });
  const successor = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await successor.connect();
  // Starting a transaction makes kafkajs send InitProducerId, which bumps the epoch and aborts the
  // zombie's open transaction.
  const successorTxn = await successor.transaction();
  await successorTxn.abort();
  let zombieFenced = false;
  try {
    await zombieTxn.commit();
  } catch (error) {
    zombieFenced = true;
  }
  await successor.disconnect();
  await producer.disconnect().catch(() => {});
  process.stdout.write(JSON.stringify({ done: true, zombieFenced }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
