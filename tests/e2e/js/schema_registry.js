// Usage: node schema_registry.js <bootstrap> <registryUrl> <topic>: registers an Avro schema with
// @kafkajs/confluent-schema-registry, produces two encoded records with kafkajs, consumes them back and
// decodes them (the schema looked up by the id in each record); an incompatible schema is then refused.
// Prints {"id", "decoded": [...], "latestId", "refused": {"status", "message"}}.
const { Kafka, logLevel } = require("kafkajs");
const { SchemaRegistry, SchemaType } = require("@kafkajs/confluent-schema-registry");

const USER = {
  type: "record", name: "User", namespace: "com.example",
  fields: [{ name: "name", type: "string" }, { name: "age", type: "int", default: 0 }],
};
const INCOMPATIBLE = {
  type: "record", name: "User", namespace: "com.example",
  fields: [{ name: "name", type: "string" }, { name: "email", type: "string" }],
};

async function main() {
  const [bootstrap, registryUrl, topic] = process.argv.slice(2);
  const registry = new SchemaRegistry({ host: registryUrl });
  const subject = `${topic}-value`;
  const { id } = await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(USER) }, { subject });
  const kafka = new Kafka({ clientId: "kafkajs-registry", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic, messages: [
    { value: await registry.encode(id, { name: "Alyssa", age: 30 }) },
    { value: await registry.encode(id, { name: "Ben", age: 7 }) },
  ] });
  await producer.disconnect();

  const reader = new SchemaRegistry({ host: registryUrl });  // knows no schema yet
  const consumer = kafka.consumer({ groupId: `registry-${topic}`, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  const decoded = [];
  let finish;
  const finished = new Promise((resolve) => { finish = resolve; });
  await consumer.run({
    eachMessage: async ({ message }) => {
      decoded.push(await reader.decode(message.value));
      if (decoded.length >= 2) finish();
    },
  });
  let timer;
  await Promise.race([finished, new Promise((resolve) => { timer = setTimeout(resolve, 50000); })]);
  clearTimeout(timer);
  await consumer.disconnect();

  const latestId = await reader.getLatestSchemaId(subject);
  let refused = null;
  try {
    await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(INCOMPATIBLE) }, { subject });
  } catch (error) {
    refused = { status: error.status || null, message: String(error.message) };
  }
  process.stdout.write(JSON.stringify({ id, decoded, latestId, refused }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
