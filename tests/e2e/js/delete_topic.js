// Usage: node delete_topic.js <bootstrap> <topic>; deletes the topic and reports whether it is gone.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const admin = new Kafka({ brokers: [bootstrap], logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  await admin.deleteTopics({ topics: [topic] });
  const gone = !(await admin.listTopics()).includes(topic);
  await admin.disconnect();
  process.stdout.write(JSON.stringify({ gone }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
