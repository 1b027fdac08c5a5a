// Usage: node consume_values.js <bootstrap> <topic> <expected> <maxBytesPerPartition>: reads every
// partition from the start until `expected` records arrived; prints each partition's values in order.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, expected, maxBytesPerPartition] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-values", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `values-${topic}`, maxWaitTimeInMs: 100,
                                    maxBytesPerPartition: Number(maxBytesPerPartition) });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const partitions = {};
  let count = 0;
  let finish;
  const finished = new Promise((resolve) => { finish = resolve; });
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      (partitions[partition] = partitions[partition] || []).push(message.value.toString());
      count += 1;
      if (count >= Number(expected)) finish();
    },
  });
  let timer;
  await Promise.race([finished, new Promise((resolve) => { timer = setTimeout(resolve, 50000); })]);
  clearTimeout(timer);  // a pending timer would keep node running after the answer
  await consumer.disconnect();
  process.stdout.write(JSON.stringify({ partitions }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
