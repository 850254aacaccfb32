/** OUT_OF_RANGE with the oldest bookmark, from a sowd whose journal keeps 5 entries (H-4). */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { SowdbError, type SowdbClient, createClient } from "@sowdb/client";
import { sleep } from "./helpers.ts";
import { TEST_CONFIG, type Sowd, startSowd } from "./server.ts";

let sowd: Sowd;
let client: SowdbClient;

before(async () => {
  sowd = await startSowd(TEST_CONFIG.replace("[server]\n", "[server]\njournal_max_entries = 5\n"));
  client = createClient({ address: sowd.address });
});

after(async () => {
  client?.close();
  await sowd?.stop();
});

test("a bookmark older than the retained journal: OUT_OF_RANGE with oldestBookmark", async () => {
  const ack = await client.publish("markers", Array.from({ length: 20 }, (_, id) => ({ id })));
  let err: SowdbError | undefined;
  const deadline = Date.now() + 20_000; // the upkeep trims every few seconds
  while (err === undefined && Date.now() < deadline) {
    try {
      const sub = client.subscribe("markers", { bookmark: 1n });
      for await (const e of sub) if (e.kind === "completed") break;
      await sleep(250);
    } catch (e) {
      assert.ok(e instanceof SowdbError);
      err = e;
    }
  }
  assert.ok(err, "the journal was never trimmed");
  assert.equal(err.code, "OUT_OF_RANGE");
  assert.equal(err.field, "bookmark");
  const oldest = err.oldestBookmark;
  assert.equal(typeof oldest, "bigint");
  assert.ok(oldest !== undefined && oldest > 1n && oldest <= ack.lastBookmark);
  assert.match(err.message, new RegExp(`resubscribe from ${oldest}`));
  // resubscribing from the oldest bookmark replays what is left
  const events = [];
  for await (const e of client.subscribe("markers", { bookmark: oldest })) {
    events.push(e);
    if (e.kind === "completed") break;
  }
  const replayed = events.flatMap((e) => (e.kind === "publish" ? e.records.map((r) => r.bookmark) : []));
  assert.equal(replayed.at(-1), ack.lastBookmark);
});
