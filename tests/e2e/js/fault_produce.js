// Usage: node fault_produce.js <bootstrap> <admin-url> <topic> <count>
// "Any language": injects a fault over minikafka's HTTP admin API with plain fetch(), then an idempotent
// kafkajs producer sends numbered messages through it. Prints the rule as added and the rules left after.
const { Kafka, logLevel } = require("kafkajs");

async function admin(url, method, body) {
  const response = await fetch(url, {
    method,
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await response.json();
  if (!response.ok) throw new Error(`${method} ${url}: HTTP ${response.status}: ${json.error}`);
  return json;
}

async function main() {
  const [bootstrap, adminUrl, topic, count] = process.argv.slice(2);
  const added = await admin(`${adminUrl}/faults`, "POST",
    { api: "Produce", error: "NOT_LEADER_OR_FOLLOWER", count: 2, topic });
  const kafka = new Kafka({ clientId: "kafkajs-faults", brokers: [bootstrap], logLevel: logLevel.NOTHING,
                            retry: { initialRetryTime: 50, retries: 8 } });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const messages = [];
  for (let n = 0; n < Number(count); n++) messages.push({ value: String(n) });
  await producer.send({ topic, acks: -1, messages });
  await producer.disconnect();
  const left = await admin(`${adminUrl}/faults`, "GET");
  const state = await admin(`${adminUrl}/state`, "GET");
  process.stdout.write(JSON.stringify({ added: added.fault, left: left.faults,
                                        highWatermark: state.topics[topic].partitions["0"].high_watermark }));
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ error: String(error && error.stack || error) }));
  process.exit(1);
});
