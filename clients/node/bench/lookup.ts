// Point lookups through the Node SDK, for `make bench-latency` (tools/bench/bench_latency.py):
// CALLS queries of one record by its key field, each timed, after a warm-up.
// Usage: node bench/lookup.ts ADDRESS TOPIC FILTER CALLS   -> one JSON line {seconds: [...]}
import { createClient } from "@sowdb/client";

const [address = "127.0.0.1:9007", topic = "orders", filter = "/orderId = 777", calls = "100"] =
  process.argv.slice(2);
const client = createClient({ address });
await client.ping(); // the connection is open before the clock starts
const lookup = async (): Promise<number> => {
  let records = 0;
  for await (const r of client.sow(topic, { filter })) if (r.sowKey) records++;
  return records;
};
for (let i = 0; i < 20; i++) await lookup(); // warm up
const seconds: number[] = [];
for (let i = 0; i < Number(calls); i++) {
  const start = performance.now();
  if ((await lookup()) !== 1) throw new Error(`expected one record for ${filter}`);
  seconds.push((performance.now() - start) / 1000);
}
console.log(JSON.stringify({ seconds }));
client.close();
