// kafkajs against several minikafka nodes: the brokers it sees, the leaders of a 3-partition topic with
// replication factor 3, and two records produced to each partition.
// Usage: node cluster.js <bootstrap> <topic>; one JSON object on stdout.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-cluster", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 3 }] });
  const result = { brokers: (await admin.describeCluster()).brokers };
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  result.leaders = metadata.topics[0].partitions.map((p) => p.leader);
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  for (let partition = 0; partition < 3; partition++) {
    await producer.send({ topic, acks: -1, messages: [{ value: "a", partition }, { value: "b", partition }] });
  }
  await producer.disconnect();
  result.offsets = (await admin.fetchTopicOffsets(topic)).sort((a, b) => a.partition - b.partition).map((o) => o.high);
  await admin.disconnect();
  process.stdout.write(JSON.stringify(result));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
