/**
 * The unary and query calls against a live sowd: ping, publish, sow (every query option),
 * historical sow, sowDelete, listTopics, the rich errors, deadlines and cancellation.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Message, PublishError, SowdbError, type SowdbClient, createClient } from "@sowdb/client";
import { until } from "./helpers.ts";
import { type Sowd, TEST_CONFIG, startSowd } from "./server.ts";

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

/** The error a promise rejects with (fails when it resolves). */
async function rejection(p: Promise<unknown>): Promise<SowdbError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof SowdbError, `expected a SowdbError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected the call to fail");
}

describe("ping and listTopics", () => {
  test("ping answers with a round-trip time", async () => {
    const ms = await client.ping();
    assert.ok(ms >= 0 && ms < 5000);
  });

  test("ping of a server still loading its state fails at once with its progress", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sowdb-node-hold-"));
    const hold = join(dir, "hold"); // the load waits while it exists (SOWDB_TEST_HOLD_LOAD)
    writeFileSync(hold, "");
    const loading = await startSowd(TEST_CONFIG, [], {
      env: { SOWDB_TEST_HOLD_LOAD: hold },
      until: /starting on (\S+):\s/,
    });
    const c = createClient({ address: loading.address });
    try {
      // first "starting: recovering the journal", then the load, held before its first record
      let err = await rejection(c.ping());
      for (const give_up = Date.now() + 30_000; err.message !== "starting: 0 of 0 records loaded"; ) {
        assert.equal(err.code, "UNAVAILABLE");
        assert.match(err.message, /^starting: recovering the journal$/);
        assert.ok(Date.now() < give_up, `still ${err.message}`);
        await new Promise((r) => setTimeout(r, 50));
        err = await rejection(c.ping());
      }
      assert.equal(err.code, "UNAVAILABLE");
      rmSync(hold);
      await until(() => c.ping().then(() => true, () => false), 30_000, "the server serving");
    } finally {
      c.close();
      await loading.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("listTopics lists the configured topics with their settings", async () => {
    const topics = await client.listTopics();
    const byName = new Map(topics.map((t) => [t.name, t]));
    assert.deepEqual(byName.get("orders")?.key, ["/orderId"]);
    assert.deepEqual(byName.get("orders")?.indexes, ["/symbol"]);
    assert.equal(byName.get("orders")?.kind, "sow");
    assert.equal(byName.get("orders")?.durability, "persistent");
    assert.equal(byName.get("quotes")?.durability, "transient");
    assert.deepEqual(byName.get("prices")?.history, { windowMs: 86_400_000, granularityMs: 0 });
    assert.equal(byName.get("orders_by_symbol")?.kind, "view");
    assert.equal(byName.get("orders_by_symbol")?.underlying, "orders");
    assert.deepEqual(byName.get("notes")?.key, []);
  });
});

describe("stats", () => {
  test("stats gives a topic's figures, the subscriptions and the server's, as the server counted them", async () => {
    const docs = [1, 2, 3].map((id) => ({ id, tag: `m${id}` }));
    await client.publish("markers", docs);
    await client.sowDelete("markers", { sowKeys: ["1"] });
    const stats = await client.stats({ topic: "markers" });
    assert.deepEqual(
      stats.topics.map((t) => [t.name, t.records, t.publishes, t.deletes]),
      [["markers", 2n, 3n, 1n]],
    );
    const stored = docs.slice(1).reduce((n, d) => n + Buffer.byteLength(JSON.stringify(d)), 0);
    assert.equal(stats.topics[0]?.bytesStored, BigInt(stored));
    assert.equal(stats.server?.journal?.lastBookmark, stats.bookmark);
    assert.ok((stats.server?.rpcs ?? []).some((r) => r.rpc === "SowService/SowDelete" && r.calls >= 1n));
    assert.equal((await client.stats({ topic: "markers", topicsOnly: true })).server, undefined);
    assert.equal((await rejection(client.stats({ topic: "nope" }))).code, "FAILED_PRECONDITION");
  });
});

describe("publish and sow", () => {
  test("publish takes objects, JSON text, bytes and Messages, in batches, and acks bookmarks", async () => {
    const docs = Array.from({ length: 250 }, (_, i) => ({ orderId: i, symbol: `SYM${i % 5}`, price: 100 + i, qty: i % 7 }));
    const ack = await client.publish("orders", docs);
    assert.equal(ack.count, 250);
    assert.equal(ack.lastBookmark - ack.firstBookmark, 249n);
    assert.equal(typeof ack.firstBookmark, "bigint");
    const more = await client.publish(
      "orders",
      ['{"orderId": 1000, "symbol": "TXT", "price": 1}', Buffer.from('{"orderId": 1001, "symbol": "TXT", "price": 2}')],
      { batchSize: 1 },
    );
    assert.deepEqual(more, { count: 2, firstBookmark: ack.lastBookmark + 1n, lastBookmark: ack.lastBookmark + 2n });
    await client.publish("notes", [new Message({ text: "hi" }, { sowKey: "n1" }), new Message('{"text":"yo"}', { sowKey: "n2" })]);
    const notes = await client.sow("notes", { orderBy: "/text" }).toArray();
    assert.deepEqual(
      notes.map((r) => [r.sowKey, r.data]),
      [
        ["n1", { text: "hi" }],
        ["n2", { text: "yo" }],
      ],
    );
  });

  test("publish takes an async iterable", async () => {
    async function* gen() {
      for (let i = 0; i < 5; i++) yield { orderId: 2000 + i, symbol: "GEN", price: i };
    }
    const ack = await client.publish("orders", gen(), { batchSize: 2 });
    assert.equal(ack.count, 5);
    assert.equal((await client.sow("orders", { filter: "/symbol = 'GEN'" }).toArray()).length, 5);
  });

  test("sow returns records as objects with bookmark, timestamp and the frames' counts", async () => {
    const result = client.sow<{ orderId: number; symbol: string; price: number }>("orders", {
      filter: "/symbol = 'SYM1' AND /price > 150",
      orderBy: "/price DESC",
      topN: 3,
      queryId: "q1",
    });
    const records = [];
    for await (const r of result) records.push(r);
    assert.deepEqual(
      records.map((r) => r.data.price),
      [346, 341, 336],
    );
    const r0 = records[0]!;
    assert.equal(r0.topic, "orders");
    assert.equal(r0.sowKey, "246");
    assert.equal(typeof r0.bookmark, "bigint");
    assert.ok(Math.abs(r0.timestamp.getTime() - Date.now()) < 60_000);
    assert.equal(result.groupBegin?.queryId, "q1");
    assert.deepEqual(result.groupEnd, { queryId: "q1", recordsReturned: 3, recordsMatched: 40, recordsScanned: 50 });
  });

  test("sow options: skipN, batchSize, sowKeys, select, grouping/projection, regex topics", async () => {
    const page = await client.sow("orders", { orderBy: "/orderId", topN: 2, skipN: 3, batchSize: 1 }).toArray();
    assert.deepEqual(
      page.map((r) => r.data.orderId),
      [3, 4],
    );
    const batches = [];
    for await (const b of client.sow("orders", { filter: "/symbol = 'SYM0'", batchSize: 7 }).batches()) batches.push(b.length);
    assert.deepEqual(batches, [7, 7, 7, 7, 7, 7, 7, 1]);
    const keyed = await client.sow("orders", { sowKeys: ["1", "2", "999999"], orderBy: "/orderId" }).toArray();
    assert.deepEqual(
      keyed.map((r) => r.sowKey),
      ["1", "2"],
    );
    const selected = await client.sow("orders", { sowKeys: ["7"], select: "[-/,+/orderId,+/price]" }).toArray();
    assert.deepEqual(selected[0]?.data, { orderId: 7, price: 107 });
    const groups = await client
      .sow("orders", { filter: "/symbol LIKE '^SYM'", grouping: ["/symbol"], projection: ["/symbol", "COUNT(/orderId) AS /n"], orderBy: "/symbol" })
      .toArray();
    assert.deepEqual(
      groups.map((r) => r.data),
      [0, 1, 2, 3, 4].map((i) => ({ symbol: `SYM${i}`, n: 50 })),
    );
    // (a NULL on the left of OR stays NULL, FILTERS.md: hence IS NOT NULL first)
    const both = await client.sow("^(orders|notes)$", { filter: "/text IS NOT NULL OR /orderId = 1" }).toArray();
    assert.deepEqual(both.map((r) => r.topic).sort(), ["notes", "notes", "orders"]);
  });

  test("historical sow: the state as of a bookmark (bigint, number, string, Date)", async () => {
    const a = await client.publish("prices", [{ symbol: "ABC", px: 100 }]);
    await client.publish("prices", [{ symbol: "ABC", px: 101 }]);
    for (const bookmark of [a.firstBookmark, Number(a.firstBookmark), String(a.firstBookmark)]) {
      const then = await client.sow("prices", { bookmark, filter: "/symbol = 'ABC'" }).toArray();
      assert.deepEqual(
        then.map((r) => r.data.px),
        [100],
      );
    }
    const now = await client.sow("prices", { bookmark: "now", filter: "/symbol = 'ABC'" }).toArray();
    assert.deepEqual(
      now.map((r) => r.data.px),
      [101],
    );
    const later = await client.sow("prices", { bookmark: new Date(Date.now() + 1000), filter: "/symbol = 'ABC'" }).toArray();
    assert.deepEqual(
      later.map((r) => r.data.px),
      [101],
    );
    const stamp = new Date(Date.now() - 3_600_000).toISOString().replace(/[-:]/g, "").replace(/\.\d+/, "");
    assert.deepEqual(await client.sow("prices", { bookmark: stamp }).toArray(), []); // 20260102T150405Z form
  });

  test("sowDelete by filter, by SowKeys and by data", async () => {
    await client.publish("items", [1, 2, 3, 4, 5].map((id) => ({ id, v: id * 10 })));
    assert.equal((await client.sowDelete("items", { filter: "/v >= 40" })).deletedCount, 2);
    assert.equal((await client.sowDelete("items", { sowKeys: ["1"] })).deletedCount, 1);
    const byData = await client.sowDelete("items", { data: { id: 2 } });
    assert.equal(byData.deletedCount, 1);
    assert.equal(typeof byData.bookmark, "bigint");
    assert.deepEqual(
      (await client.sow("items").toArray()).map((r) => r.data),
      [{ id: 3, v: 30 }],
    );
    assert.equal((await client.sowDelete("items", { filter: "/v > 1000" })).deletedCount, 0);
  });
});

describe("errors carry the rich details", () => {
  test("a bad filter: INVALID_ARGUMENT, field filter, a column, a reason", async () => {
    const err = await rejection(client.sow("orders", { filter: "/price >" }).toArray());
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.equal(err.grpcCode, 3);
    assert.equal(err.field, "filter");
    assert.equal(err.column, 9);
    assert.equal(err.reason, "EXPRESSION_ERROR");
    assert.match(err.message, /expected an operand at column 9/);
    assert.equal(err.fieldViolations[0]?.field, "filter");
  });

  test("bad options, bad subscriptions: field named", async () => {
    const big = await rejection(client.sow("orders", { batchSize: 20_000 }).toArray());
    assert.equal(big.code, "INVALID_ARGUMENT");
    assert.equal(big.field, "batch_size");
    const skip = await rejection(client.sow("orders", { skipN: 2 }).toArray());
    assert.equal(skip.code, "INVALID_ARGUMENT");
    const order = await rejection(client.sow("orders", { orderBy: "/price SIDEWAYS" }).toArray());
    assert.equal(order.field, "order_by");
    const notSow = await rejection(client.sow("no_such_topic").toArray());
    assert.equal(notSow.code, "FAILED_PRECONDITION");
    const noHistory = await rejection(client.sow("orders", { bookmark: 1n }).toArray());
    assert.equal(noHistory.code, "FAILED_PRECONDITION");
    const badSub = client.sowAndSubscribe("orders", { filter: "(/a = 1" });
    const subErr = await rejection((async () => {
      for await (const _ of badSub) {
        /* nothing arrives */
      }
    })());
    assert.equal(subErr.field, "filter");
    const unknown = await rejection(client.replaceSubscription("no-such-sub", { filter: "/a = 1" }));
    assert.equal(unknown.code, "NOT_FOUND");
    const noKey = await rejection(client.sowDelete("items", {}));
    assert.equal(noKey.code, "INVALID_ARGUMENT");
  });

  test("a refused publish batch: PublishError with the message index and exact stored counts", async () => {
    const docs: (object | string)[] = Array.from({ length: 30 }, (_, i) => ({ id: 100 + i, v: i }));
    docs[23] = "{not json";
    const err = await rejection(client.publish("items", docs, { batchSize: 10 }));
    assert.ok(err instanceof PublishError);
    assert.equal(err.code, "INVALID_ARGUMENT");
    assert.equal(err.batchIndex, 2);
    assert.equal(err.messageIndex, 23);
    assert.equal(err.field, "messages[3].data");
    assert.equal(err.stored, 20);
    assert.equal(err.lastBookmark - err.firstBookmark, 19n);
    const ids = (await client.sow("items", { filter: "/id >= 100 AND /id < 200" }).toArray()).map((r) => r.data.id);
    assert.equal(ids.length, 20); // nothing of the refused batch
    assert.ok(ids.every((id) => id < 120));
  });

  test("a refused batch in a long publish: nothing after it is stored, though later batches were in flight", async () => {
    const docs: (object | string)[] = Array.from({ length: 5000 }, (_, i) => ({ id: 1000 + i, v: i }));
    docs[1234] = { v: "no id" };
    const err = await rejection(client.publish("items", docs, { batchSize: 10 }));
    assert.ok(err instanceof PublishError);
    assert.equal(err.messageIndex, 1234);
    assert.equal(err.batchIndex, 123);
    assert.equal(err.stored, 1230);
    // the server applies no request after a refused one with stop_on_error (the SDK's)
    const stored = await client.sow("items", { filter: "/id >= 1000", batchSize: 1000 }).toArray();
    assert.equal(stored.length, err.stored);
    assert.ok(stored.every((r) => r.data.id < 2230));
  });

  test("an error from the documents themselves is rethrown as it is; the batches before it are stored", async () => {
    function* docs() {
      for (let i = 0; i < 25; i++) yield { id: 3000 + i };
      yield { id: 3025, big: 1n }; // JSON.stringify cannot encode a BigInt
    }
    await assert.rejects(client.publish("items", docs(), { batchSize: 10 }), TypeError);
    const stored = await client.sow("items", { filter: "/id >= 3000 AND /id < 4000" }).toArray();
    assert.equal(stored.length, 20);
    await assert.rejects(
      client.publish("items", (async function* () {
        yield { id: 4000 };
        throw new RangeError("the source failed");
      })()),
      RangeError,
    );
  });

  test("publish to a view is FAILED_PRECONDITION; a topic without keys needs a SowKey", async () => {
    const view = await rejection(client.publish("orders_by_symbol", [{ symbol: "X" }]));
    assert.ok(view instanceof PublishError);
    assert.equal(view.code, "FAILED_PRECONDITION");
    assert.equal(view.stored, 0);
    const noKey = await rejection(client.publish("notes", [{ text: "no key" }]));
    assert.equal(noKey.code, "INVALID_ARGUMENT");
    assert.equal((noKey as PublishError).messageIndex, 0);
    const missingField = await rejection(client.publish("orders", [{ orderId: 1 }, { symbol: "no id" }]));
    assert.equal((missingField as PublishError).messageIndex, 1);
  });
});

describe("deadlines and cancellation of calls", () => {
  test("timeoutMs: a subscription past its deadline fails with DEADLINE_EXCEEDED", async () => {
    const sub = client.subscribe("orders", { timeoutMs: 300 });
    const started = Date.now();
    const err = await rejection((async () => {
      for await (const _ of sub) {
        /* heartbeats */
      }
    })());
    assert.equal(err.code, "DEADLINE_EXCEEDED");
    assert.ok(Date.now() - started < 5000);
    assert.ok((await client.ping()) >= 0);
  });

  test("timeoutMs on unary calls and a generous deadline that passes", async () => {
    assert.equal((await client.listTopics({ timeoutMs: 10_000 })).length > 0, true);
    const err = await rejection(client.listTopics({ timeoutMs: 0.001 }));
    assert.equal(err.code, "DEADLINE_EXCEEDED");
  });

  test("an aborted signal: a unary call rejects with CANCELLED, a sow ends quietly", async () => {
    const ac = new AbortController();
    ac.abort();
    const err = await rejection(client.listTopics({ signal: ac.signal }));
    assert.equal(err.code, "CANCELLED");
    const ac2 = new AbortController();
    let n = 0;
    for await (const _ of client.sow("orders", { signal: ac2.signal, batchSize: 1 })) {
      if (++n === 3) ac2.abort();
    }
    assert.ok(n >= 3 && n < 250);
  });
});

describe("publish under the message limit", () => {
  test("documents that together pass the gRPC message limit publish in requests cut by bytes", async () => {
    // each under max_document_bytes (1 MiB); 30 of them (27 MB) over one 16 MiB request of the default batch
    const pad = "x".repeat(900_000);
    const docs = Array.from({ length: 30 }, (_, i) => ({ id: 90_000 + i, pad }));
    const ack = await client.publish("items", docs);
    assert.equal(ack.count, 30);
    assert.equal(ack.lastBookmark - ack.firstBookmark, 29n);
    const small = createClient({ address: sowd.address, maxMessageBytes: 2 * 1024 * 1024 });
    try {
      const more = Array.from({ length: 5 }, (_, i) => ({ id: 90_100 + i, pad }));
      assert.equal((await small.publish("items", more)).count, 5); // two a request under 2 MiB
    } finally {
      small.close();
    }
    const ids = (await client.sow("items", { filter: "/id >= 90000", select: "[-/,+/id]", batchSize: 100 }).toArray()).map(
      (r) => r.data.id,
    );
    assert.equal(ids.length, 35);
  });
});

describe("an empty key list", () => {
  test("is refused alike by sow and sowDelete, as the CLI and the Python SDK refuse it", async () => {
    assert.throws(() => client.sow("items", { sowKeys: [] }), /sowKeys is empty: it names no record/);
    await assert.rejects(client.sowDelete("items", { sowKeys: [] }), /sowKeys is empty: it names no record/);
  });
});
