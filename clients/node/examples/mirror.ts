import { Mirror, createClient } from "@sowdb/client";

const client = createClient({ address: process.env["SOWDB_ADDRESS"] ?? "127.0.0.1:9007" }); // token?, tls?
const mirror = new Mirror<{ orderId: number; price: number }>(); // keyed by (topic, SowKey)
const signal = AbortSignal.timeout(Number(process.env["SOWDB_SECONDS"] ?? 10) * 1000); // ends in 10 s; or an AbortController

for await (const event of client.sowAndSubscribe("orders", { filter: "/symbol = 'SYM1'", oof: true, signal })) {
  mirror.apply(event); // query results, publishes, oof and deletes
  switch (event.kind) { // a discriminated union: each case has its own fields
    case "group_end": console.log(`${mirror.size} orders of SYM1`); break;
    case "publish": for (const r of event.records) console.log(`order ${r.data.orderId} at ${r.data.price}`); break;
    case "oof": console.log(`order ${event.record.sowKey} left (${event.reason}); ${mirror.size} now`); break;
  }
}
client.close();
