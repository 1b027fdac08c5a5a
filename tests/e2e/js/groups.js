// kafkajs consumer-group scenario for minikafka's e2e tests.
// Usage: node groups.js <bootstrap> <topic> <group>; prints one JSON object on stdout.
const { Kafka, logLevel } = require("kafkajs");

const deadline = Date.now() + 45000;
async function until(predicate, what) {
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function member(kafka, group, topic, name, state) {
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 300,
                                    rebalanceTimeout: 10000 });
  state[name] = { generation: -1, partitions: [], messages: 0 };
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    state[name].generation = e.payload.groupId === group ? state[name].generation + 1 : -1;
    state[name].partitions = (e.payload.memberAssignment[topic] || []).slice().sort();
  });
  return consumer;
}

async function main() {
  const [bootstrap, topic, group] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-groups", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 4 }] });
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({ topic, messages: [0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ partition: i % 4, value: `v${i}` })) });
  await producer.disconnect();

  const state = {};
  const result = {};
  const c1 = member(kafka, group, topic, "c1", state);
  const c2 = member(kafka, group, topic, "c2", state);
  for (const [name, c] of [["c1", c1], ["c2", c2]]) {
    await c.connect();
    await c.subscribe({ topic, fromBeginning: true });
    await c.run({ eachMessage: async () => { state[name].messages += 1; } });
  }
  const split = () => state.c1.partitions.length === 2 && state.c2.partitions.length === 2 &&
    new Set([...state.c1.partitions, ...state.c2.partitions]).size === 4;
  await until(split, "two consumers to split 4 partitions");
  result.split = [state.c1.partitions, state.c2.partitions];
  await until(() => state.c1.messages + state.c2.messages >= 8, "8 messages");
  result.consumed = state.c1.messages + state.c2.messages;

  const described = await admin.describeGroups([group]);
  result.state = described.groups[0].state;
  result.members = described.groups[0].members.length;
  result.protocol = described.groups[0].protocol;
  result.listed = (await admin.listGroups()).groups.some((g) => g.groupId === group);

  await c2.disconnect();
  await until(() => state.c1.partitions.length === 4, "partitions to move to the remaining consumer");
  result.afterLeave = state.c1.partitions;
  await c1.disconnect();

  const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  result.committed = offsets[0].partitions.map((p) => [p.partition, p.offset]).sort();
  result.deleted = await admin.deleteGroups([group]);
  result.listedAfterDelete = (await admin.listGroups()).groups.some((g) => g.groupId === group);
  await admin.disconnect();
  console.log(JSON.stringify(result));
}

main().then(() => process.exit(0)).catch((err) => {
  console.log(JSON.stringify({ error: String(err && err.stack || err) }));
  process.exit(1);
});
