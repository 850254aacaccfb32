import { createClient } from "@sowdb/client";

// the servers of a cluster (rule HA-5): one string with commas, or an array
const client = createClient({
  address: process.env["SOWDB_SERVERS"] ?? "127.0.0.1:9007,127.0.0.1:9008,127.0.0.1:9009",
  failoverTimeoutMs: 30_000, // how long a call looks for the primary again after a failover
  readFrom: "primary", // or "any": queries and subscriptions on any node, replicas included
});
const ack = await client.publish("orders", [{ orderId: 7, symbol: "SYM1", price: 100 }]); // on the primary
console.log(`stored at bookmark ${ack.lastBookmark}`);
for (const n of await client.clusterStatus()) console.log(`${n.node} is ${n.role}, applied ${n.appliedBookmark}`);
client.close();
