// One benchmark round of the Node SDK: publish the orders of a JSON-lines file, 100 per request.
// Usage: node bench/publish.ts ADDRESS TOPIC FILE   -> one JSON line {messages, seconds}
import { readFileSync } from "node:fs";
import { createClient } from "@sowdb/client";

const [address = "127.0.0.1:9007", topic = "orders", file = "orders.jsonl"] = process.argv.slice(2);
const docs: object[] = readFileSync(file, "utf8")
  .split("\n")
  .filter((l) => l.length > 0)
  .map((l) => JSON.parse(l) as object); // objects, as an application holds them
const client = createClient({ address });
await client.ping();
const start = performance.now();
const ack = await client.publish(topic, docs, { batchSize: 100 });
const seconds = (performance.now() - start) / 1000;
console.log(JSON.stringify({ messages: ack.count, seconds }));
client.close();
