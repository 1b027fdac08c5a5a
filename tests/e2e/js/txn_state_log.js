// Usage: node txn_state_log.js <bootstrap> <topic> <transactionalId> <partition> <keyBase64> <expected> <waitMs>:
// commits one transaction with one record, then reads __transaction_state with a kafkajs consumer and
// prints, base64, the key and value of the records of that partition with that key, in log order, once
// `expected` of them were read (or waitMs passed).
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, transactionalId, partition, keyB64, expected, waitMs] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-txn-log", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const txn = await producer.transaction();
  await txn.send({ topic, messages: [{ partition: 0, value: "v" }] });
  await txn.commit();
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `txn-log-${topic}`, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topics: ["__transaction_state"], fromBeginning: true });
  const records = [];
  let finish;
  const finished = new Promise((resolve) => { finish = resolve; });
  await consumer.run({
    eachMessage: async ({ partition: p, message }) => {
      if (p !== Number(partition) || !message.key || message.key.toString("base64") !== keyB64) return;
      records.push({ offset: message.offset, key: keyB64, value: message.value ? message.value.toString("base64") : null });
      if (records.length >= Number(expected)) finish();
    },
  });
  let timer;
  await Promise.race([finished, new Promise((resolve) => { timer = setTimeout(resolve, Number(waitMs)); })]);
  clearTimeout(timer);
  await consumer.disconnect();
  process.stdout.write(JSON.stringify({ records }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
