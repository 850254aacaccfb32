// A live mirror of the orders of SYM1: the query's results, then every change, kept exact.
// Run: node examples/mirror.ts  (SOWDB_ADDRESS=host:port, SOWDB_SECONDS=N to stop after N s)
import { Mirror, createClient } from "@sowdb/client";

const client = createClient({ address: process.env["SOWDB_ADDRESS"] ?? "127.0.0.1:9007" });
const seconds = Number(process.env["SOWDB_SECONDS"] ?? Infinity);
const signal = Number.isFinite(seconds) ? AbortSignal.timeout(seconds * 1000) : undefined;
const mirror = new Mirror<{ orderId: number; price: number }>();

for await (const event of client.sowAndSubscribe("orders", { filter: "/symbol = 'SYM1'", oof: true, signal })) {
  mirror.apply(event); // query results, publishes, oof and deletes
  if (event.kind === "group_end") console.log(`${mirror.size} orders of SYM1`);
  if (event.kind === "publish") for (const r of event.records) console.log(`order ${r.data.orderId} at ${r.data.price}`);
  if (event.kind === "oof") console.log(`order ${event.record.sowKey} left (${event.reason}); ${mirror.size} now`);
}
client.close();
