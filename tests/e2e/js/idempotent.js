// Usage: node idempotent.js <bootstrap> <topic> <count>; an idempotent kafkajs producer sends numbered messages.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, count] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-idempotent", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const total = Number(count);
  for (let start = 0; start < total; start += 500) {
    const messages = [];
    for (let n = start; n < Math.min(start + 500, total); n++) messages.push({ value: String(n) });
    await producer.send({ topic, acks: -1, messages });
  }
  await producer.disconnect();
  process.stdout.write(JSON.stringify({ sent: total }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
