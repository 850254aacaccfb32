/**
 * Subscriptions against a live sowd: sowAndSubscribe frames, live events and the typed union,
 * the S-1 scenario (mirrors under a concurrent publisher equal the final state), oof, delta,
 * subscribe with a bookmark, replaceSubscription, and cancellation (the server drops the
 * subscription).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Mirror, SowdbError, type SowEvent, type SowdbClient, createClient } from "@sowdb/client";
import { eventsUntil, kinds, nextWithin, sleep, until } from "./helpers.ts";
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

/** What a switch on `kind` narrows to: a compile-time check as much as a runtime one. */
function describeEvent(e: SowEvent): string {
  switch (e.kind) {
    case "subscribed":
      return `subscribed ${e.subId.length > 0}`;
    case "group_begin":
      return `group_begin ${e.queryId}`;
    case "sow":
      return `sow ${e.records.length}`;
    case "group_end":
      return `group_end ${e.recordsReturned}/${e.recordsMatched}`;
    case "publish":
      return `publish ${e.records.map((r) => r.sowKey).join(" ")}`;
    case "oof":
      return `oof ${e.record.sowKey} ${e.reason}`;
    case "deleted":
      return `deleted ${e.records.map((r) => r.sowKey).join(" ")}`;
    case "completed":
      return `completed ${typeof e.bookmark}`;
    case "heartbeat":
      return `heartbeat ${typeof e.bookmark}`;
    default: {
      const never: never = e;
      return never;
    }
  }
}

describe("sowAndSubscribe", () => {
  test("frames, then live publishes and oof, as a discriminated union", async () => {
    await client.publish("orders", [
      { orderId: 1, symbol: "SYM1", price: 160 },
      { orderId: 2, symbol: "SYM1", price: 170 },
      { orderId: 3, symbol: "SYM2", price: 180 },
    ]);
    const sub = client.sowAndSubscribe("orders", {
      filter: "/symbol = 'SYM1' AND /price > 150",
      oof: true,
      queryId: "live",
      batchSize: 1,
    });
    const it = sub[Symbol.asyncIterator]();
    const head = await eventsUntil(it, (e) => e.kind === "group_end");
    assert.deepEqual(head.map(describeEvent), ["subscribed true", "group_begin live", "sow 1", "sow 1", "group_end 2/2"]);
    assert.ok(sub.subId.length > 0);
    const begin = head[1]!;
    assert.equal(begin.kind, "group_begin");

    await client.publish("orders", [{ orderId: 1001, symbol: "SYM1", price: 160 }]); // -> publish
    await client.publish("orders", [{ orderId: 1001, price: 10 }], { delta: true }); // -> oof match
    await client.sowDelete("orders", { sowKeys: ["2"] }); // -> oof deleted
    await client.publish("orders", [{ orderId: 3, symbol: "SYM2", price: 999 }]); // not in scope
    const live = await eventsUntil(it, (e) => e.kind === "oof" && e.reason === "deleted");
    assert.deepEqual(live.map(describeEvent), ["publish 1001", "oof 1001 match", "oof 2 deleted"]);
    const oof = live[1]!;
    assert.ok(oof.kind === "oof");
    assert.deepEqual(oof.record.data, { orderId: 1001, symbol: "SYM1", price: 10 }); // the update that moved it out
    if (begin.kind === "group_begin") assert.ok(oof.record.bookmark > begin.bookmark);
    sub.cancel();
    assert.equal((await nextWithin(it)).done, true);
  });

  test("S-1: mirrors started at random moments under a concurrent publisher equal the final state", async () => {
    const keys = 200;
    const filter = "/v % 3 != 0"; // records move in and out of scope: sow, publish and oof all happen
    const publisher = createClient({ address: sowd.address });
    await publisher.publish("items", Array.from({ length: keys }, (_, id) => ({ id, v: id, round: 0 })));
    let stopPublishing = false;
    let rounds = 0;
    const publishing = (async () => {
      for (let round = 1; !stopPublishing && round < 10_000; round++) {
        const batch = Array.from({ length: 20 }, () => {
          const id = Math.floor(Math.random() * keys);
          return { id, v: Math.floor(Math.random() * 1000), round };
        });
        await publisher.publish("items", batch, { batchSize: 5 });
        if (round % 7 === 0) await publisher.sowDelete("items", { sowKeys: [String(Math.floor(Math.random() * keys))] });
        rounds = round;
      }
    })();

    const mirrors = Array.from({ length: 6 }, async (_, i) => {
      await sleep(50 + i * 150 + Math.random() * 100);
      const mirror = new Mirror<{ id: number; v: number; round: number }>();
      const sub = client.sowAndSubscribe<{ id: number; v: number; round: number }>("items", {
        filter,
        oof: true,
        batchSize: 17,
      });
      const it = sub[Symbol.asyncIterator]();
      let point = -1n;
      let lastLive = 0n;
      const events: SowEvent[] = [];
      const reader = (async () => {
        for (;;) {
          const r = await it.next();
          if (r.done) return;
          const e = r.value;
          events.push(e);
          if (e.kind === "group_begin") point = e.bookmark;
          if (e.kind === "sow") for (const rec of e.records) assert.ok(rec.bookmark <= point, "a query record after the point");
          if (e.kind === "publish" || e.kind === "oof") {
            for (const rec of e.records) {
              assert.ok(rec.bookmark > point, "a live event from before the point (a duplicate)");
              assert.ok(rec.bookmark > lastLive || e.kind === "oof", "live events out of order");
              lastLive = rec.bookmark;
            }
          }
          mirror.apply(e);
        }
      })();
      return { mirror, sub, reader, events };
    });
    const started = await Promise.all(mirrors);
    await sleep(300);
    stopPublishing = true;
    await publishing;
    // a final change every mirror must see: once it has, it has seen everything before it
    const end = await publisher.publish("items", [{ id: keys, v: 1, round: -1 }]);
    for (const m of started) {
      await until(() => m.mirror.bookmark >= end.lastBookmark, 10_000, "the mirror to catch up");
    }
    const expected = new Map(
      (await client.sow("items", { filter, batchSize: 1000 }).toArray()).map((r) => [r.sowKey, r] as const),
    );
    for (const { mirror, sub, reader, events } of started) {
      assert.ok(mirror.ready);
      assert.equal(mirror.size, expected.size, `mirror holds ${mirror.size}, the state ${expected.size}`);
      for (const [key, rec] of expected) {
        const held = mirror.get("items", key);
        assert.deepEqual(held?.data, rec.data, `record ${key}`);
        assert.equal(held?.bookmark, rec.bookmark, `bookmark of ${key}`);
      }
      assert.ok(events.some((e) => e.kind === "oof"), "some oof happened");
      sub.cancel();
      await reader;
    }
    assert.ok(rounds > 3, `the publisher ran ${rounds} rounds`);
    publisher.close();
  });

  test("delta subscription: a Mirror with delta merges the changed fields", async () => {
    await client.publish("items", [{ id: 5000, name: "x", nested: { a: 1, b: 2 }, tags: [1, 2] }]);
    const mirror = new Mirror({ delta: true });
    const sub = client.sowAndSubscribe("items", { filter: "/id = 5000", delta: true });
    const it = sub[Symbol.asyncIterator]();
    for (const e of await eventsUntil(it, (e) => e.kind === "group_end")) mirror.apply(e);
    await client.publish("items", [{ id: 5000, nested: { b: 3 }, tags: [9] }], { delta: true });
    const [pub] = await eventsUntil(it, (e) => e.kind === "publish");
    assert.ok(pub?.kind === "publish");
    mirror.apply(pub);
    assert.deepEqual(mirror.get("items", "5000")?.data, { id: 5000, name: "x", nested: { a: 1, b: 3 }, tags: [9] });
    sub.cancel();
  });

  test("a historical sowAndSubscribe: state as of the bookmark, the journal since, completed, live", async () => {
    const a = await client.publish("prices", [{ symbol: "HIS", px: 1 }]);
    await client.publish("prices", [{ symbol: "HIS", px: 2 }]);
    const sub = client.sowAndSubscribe("prices", { filter: "/symbol = 'HIS'", bookmark: a.lastBookmark });
    const it = sub[Symbol.asyncIterator]();
    const events = await eventsUntil(it, (e) => e.kind === "completed");
    assert.equal(kinds(events), "subscribed,group_begin,sow,group_end,publish,completed");
    const mirror = new Mirror();
    for (const e of events) mirror.apply(e);
    assert.deepEqual(mirror.get("prices", '"HIS"')?.data, { symbol: "HIS", px: 2 });
    sub.cancel();
  });
});

describe("subscribe", () => {
  test("live messages, deleted events, and a bookmark replay ending in completed", async () => {
    const first = await client.publish("markers", [{ id: 1, n: "a" }]);
    await client.publish("markers", [{ id: 2, n: "b" }]);
    const replay = client.subscribe("markers", { bookmark: first.firstBookmark - 1n });
    const rit = replay[Symbol.asyncIterator]();
    const replayed = await eventsUntil(rit, (e) => e.kind === "completed");
    assert.equal(kinds(replayed), "subscribed,publish,completed");
    const pub = replayed[1]!;
    assert.ok(pub.kind === "publish");
    assert.deepEqual(
      pub.records.map((r) => r.data.n),
      ["a", "b"],
    );
    replay.cancel();

    const sub = client.subscribe("markers", { filter: "/id < 100" });
    const it = sub[Symbol.asyncIterator]();
    await eventsUntil(it, (e) => e.kind === "subscribed");
    await client.publish("markers", [{ id: 3, n: "c" }]);
    await client.sowDelete("markers", { sowKeys: ["1"] });
    const live = await eventsUntil(it, (e) => e.kind === "deleted");
    assert.deepEqual(live.map(describeEvent), ["publish 3", "deleted 1"]);
    sub.cancel();

    const all = client.subscribe("markers", { bookmark: "0" });
    const ait = all[Symbol.asyncIterator]();
    const everything = await eventsUntil(ait, (e) => e.kind === "completed");
    assert.ok(everything.some((e) => e.kind === "deleted"));
    all.cancel();
  });

  test("a regex subscription receives both topics in the one total order (S-3)", async () => {
    const sub = client.subscribe("^(markers|items)$");
    const it = sub[Symbol.asyncIterator]();
    await eventsUntil(it, (e) => e.kind === "subscribed");
    await client.publish("markers", [{ id: 50 }]);
    await client.publish("items", [{ id: 6000 }]);
    await client.publish("markers", [{ id: 51 }]);
    const got: string[] = [];
    while (got.length < 3) {
      const [e] = await eventsUntil(it, (e) => e.kind === "publish");
      if (e?.kind === "publish") for (const r of e.records) got.push(`${r.topic}:${r.sowKey}`);
    }
    assert.deepEqual(got, ["markers:50", "items:6000", "markers:51"]);
    sub.cancel();
  });

  test("heartbeats carry the latest bookmark on an idle stream", async () => {
    const sub = client.subscribe("quotes", { filter: "/symbol = 'NEVER'" });
    const it = sub[Symbol.asyncIterator]();
    let beat: SowEvent | undefined;
    for (let i = 0; i < 5 && beat?.kind !== "heartbeat"; i++) beat = (await nextWithin(it, 5000)).value;
    assert.equal(beat?.kind, "heartbeat");
    if (beat?.kind === "heartbeat") assert.ok(beat.bookmark > 0n);
    sub.cancel();
  });
});

describe("replaceSubscription (R-1)", () => {
  test("widening delivers the records now in scope, narrowing sends oof", async () => {
    await client.publish("quotes", [
      { symbol: "RA", px: 1 },
      { symbol: "RB", px: 2 },
      { symbol: "RC", px: 3 },
    ]);
    const mirror = new Mirror();
    const sub = client.sowAndSubscribe("quotes", { filter: "/symbol = 'RA'", oof: true });
    const it = sub[Symbol.asyncIterator]();
    for (const e of await eventsUntil(it, (e) => e.kind === "group_end")) mirror.apply(e);
    assert.deepEqual(mirror.values(), [{ symbol: "RA", px: 1 }]);

    const at = await client.replaceSubscription(sub.subId, { filter: "/symbol IN ('RA', 'RB')", oof: true });
    assert.equal(typeof at, "bigint");
    for (const e of await eventsUntil(it, (e) => e.kind === "publish" || e.kind === "sow")) mirror.apply(e);
    assert.deepEqual(mirror.values().map((d) => d.symbol).sort(), ["RA", "RB"]);

    await client.replaceSubscription(sub.subId, { filter: "/symbol = 'RB'", oof: true });
    const [gone] = await eventsUntil(it, (e) => e.kind === "oof");
    assert.ok(gone?.kind === "oof");
    assert.equal(gone.reason, "match");
    mirror.apply(gone);
    assert.deepEqual(mirror.values(), [{ symbol: "RB", px: 2 }]);

    // only the connection that placed a subscription can replace it
    const other = createClient({ address: sowd.address });
    await assert.rejects(other.replaceSubscription(sub.subId, { filter: "" }), (e: unknown) => {
      return e instanceof SowdbError && e.code === "NOT_FOUND";
    });
    other.close();
    sub.cancel();
  });
});

describe("cancellation leaves no subscription on the server", () => {
  async function gone(subId: string): Promise<boolean> {
    try {
      await client.replaceSubscription(subId, { filter: "" });
      return false;
    } catch (e) {
      if (e instanceof SowdbError && e.code === "NOT_FOUND") return true;
      throw e;
    }
  }

  test("an AbortSignal ends the stream quietly and the server drops the subscription", async () => {
    const ac = new AbortController();
    const sub = client.sowAndSubscribe("orders", { signal: ac.signal, filter: "/symbol = 'CANCEL'" });
    const seen: string[] = [];
    for await (const e of sub) {
      seen.push(e.kind);
      if (e.kind === "group_end") {
        assert.equal(await gone(sub.subId), false, "the subscription is live before the abort");
        ac.abort();
      }
    }
    assert.deepEqual(seen, ["subscribed", "group_begin", "group_end"]);
    await until(() => gone(sub.subId), 5000, "the server to drop the subscription");
    // the server keeps working: publish, query, ping
    await client.publish("orders", [{ orderId: 7777, symbol: "CANCEL" }]);
    assert.equal((await client.sow("orders", { filter: "/symbol = 'CANCEL'" }).toArray()).length, 1);
    assert.ok((await client.ping()) >= 0);
  });

  test("leaving a for-await loop (break) and cancel() drop the subscription too", async () => {
    const sub = client.subscribe("orders", { filter: "/symbol = 'BREAK'" });
    for await (const e of sub) if (e.kind === "subscribed") break;
    await until(() => gone(sub.subId), 5000, "the server to drop the subscription after break");

    const sub2 = client.sowAndSubscribe("orders", { filter: "/symbol = 'BREAK'" });
    const it = sub2[Symbol.asyncIterator]();
    await eventsUntil(it, (e) => e.kind === "group_end");
    sub2.cancel();
    assert.equal((await nextWithin(it)).done, true);
    await until(() => gone(sub2.subId), 5000, "the server to drop the subscription after cancel()");
  });

  test("close() ends the client's open streams quietly; later calls fail with CANCELLED", async () => {
    const other = createClient({ address: sowd.address });
    const sub = other.subscribe("orders", { filter: "/symbol = 'CLOSE'" });
    const it = sub[Symbol.asyncIterator]();
    await eventsUntil(it, (e) => e.kind === "subscribed");
    other.close();
    assert.equal((await nextWithin(it)).done, true);
    await assert.rejects(other.ping(), (e: unknown) => e instanceof SowdbError && e.code === "CANCELLED");
    // the connection ended with GOAWAY NO_ERROR: sowd logged no error for it
    await sleep(100);
    assert.doesNotMatch(sowd.output(), /goaway \[8\]/i);
  });

  test("a signal aborted before the call starts: the stream is empty", async () => {
    const sub = client.subscribe("orders", { signal: AbortSignal.abort() });
    const events = [];
    for await (const e of sub) events.push(e);
    assert.deepEqual(events, []);
  });
});
