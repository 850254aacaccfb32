/** The example under examples/ runs against a live sowd and prints what its mirror sees. */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { type SowdbClient, createClient } from "@sowdb/client";
import { type Sowd, startSowd } from "./server.ts";

let sowd: Sowd;
let client: SowdbClient;

before(async () => {
  sowd = await startSowd();
  client = createClient({ address: sowd.address });
});

after(async () => {
  client?.close();
  await sowd?.stop();
});

test("examples/mirror.ts: a live mirror in 15 lines, which ends by itself", async () => {
  await client.publish("orders", [
    { orderId: 1, symbol: "SYM1", price: 100 },
    { orderId: 2, symbol: "SYM1", price: 110 },
    { orderId: 3, symbol: "SYM1", price: 120 },
    { orderId: 4, symbol: "SYM2", price: 130 },
  ]);
  const proc = spawn(process.execPath, [join(import.meta.dirname, "..", "examples", "mirror.ts")], {
    cwd: join(import.meta.dirname, ".."),
    env: { ...process.env, SOWDB_ADDRESS: sowd.address, SOWDB_SECONDS: undefined }, // its default: ends by itself
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  proc.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<number | null>((r) => proc.on("exit", (code) => r(code)));
  const lines: string[] = [];
  const expected = ["3 orders of SYM1", "order 5 at 140", "order 1 left (deleted); 3 now"];
  for await (const line of createInterface({ input: proc.stdout })) {
    lines.push(line);
    if (line === "3 orders of SYM1") {
      await client.publish("orders", [{ orderId: 5, symbol: "SYM1", price: 140 }]);
      await client.publish("orders", [{ orderId: 6, symbol: "SYM2", price: 150 }]); // not SYM1
      await client.sowDelete("orders", { sowKeys: ["1"] });
    }
    if (lines.length === expected.length) break;
  }
  assert.deepEqual(lines, expected, stderr);
  assert.equal(await exited, 0, `the example ends quietly when its signal times out\n${stderr}`);
});

test("the Node.js page (docs/node.md) shows examples/mirror.ts as it is", () => {
  const page = readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "node.md"), "utf8");
  const block = /```ts\n([\s\S]*?)```/.exec(page)?.[1];
  assert.equal(block, readFileSync(join(import.meta.dirname, "..", "examples", "mirror.ts"), "utf8"));
});
