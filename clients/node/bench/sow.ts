// One benchmark round of the Node SDK: `sow` a whole topic, every record received as an object.
// Usage: node bench/sow.ts ADDRESS TOPIC BATCH_SIZE   -> one JSON line {records, seconds, check}
import { createClient } from "@sowdb/client";

const [address = "127.0.0.1:9007", topic = "orders", batch = "100"] = process.argv.slice(2);
const client = createClient({ address });
await client.ping(); // the connection is open before the clock starts
const start = performance.now();
let records = 0;
let check = 0;
for await (const r of client.sow<{ qty: number }>(topic, { batchSize: Number(batch) })) {
  records++;
  check += r.data.qty; // the document is parsed: read a field of it
}
const seconds = (performance.now() - start) / 1000;
console.log(JSON.stringify({ records, seconds, check }));
client.close();
