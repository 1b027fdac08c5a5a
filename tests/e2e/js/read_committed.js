// Usage: node read_committed.js <bootstrap> <topic> <expected> <waitMs>: reads partition 0 from the
// start with kafkajs's default read_committed isolation; prints the values it saw within waitMs.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, expected, waitMs] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-rc", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `rc-${topic}`, readUncommitted: false, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const values = [];
  let finish;
  const finished = new Promise((resolve) => { finish = resolve; });
  await consumer.run({
    eachMessage: async ({ message }) => {
      values.push(message.value.toString());
      if (values.length > Number(expected)) finish();
    },
  });
  // Wait past the expected count, so a record beyond it (an aborted or open one) would be seen.
  await Promise.race([finished, new Promise((resolve) => setTimeout(resolve, Number(waitMs)))]);
  await consumer.disconnect();
  process.stdout.write(JSON.stringify({ values }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
