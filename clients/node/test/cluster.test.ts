/**
 * The Node SDK against a cluster of real processes (SPEC §13, HA-5): etcd and three `sowd` with
 * `ack = "sync"`. A list of servers: writes find the primary (from any node's ClusterStatus, or
 * from a replica's refusal) and find it again after a `kill -9`; reads go to the primary or,
 * with `readFrom: "any"`, to every node in turn; a subscription resumes after its node dies from
 * the last bookmark it delivered, with no gap and no duplicate; a publish retried after the
 * failover is applied once (J-4 producer ids); a connection gone silent is found dead by the
 * keepalives.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Mirror, type SowdbClient, SowdbError, createClient } from "@sowdb/client";
import { Cluster, LEASE_TTL_S, SilentProxy } from "./cluster.ts";
import { python, startSowd } from "./server.ts";
import { eventsUntil, until } from "./helpers.ts";

let cluster: Cluster;
const clients: SowdbClient[] = [];

function client(...args: Parameters<typeof createClient>): SowdbClient {
  const c = createClient(...args);
  clients.push(c);
  return c;
}

before(async () => {
  cluster = await Cluster.start(["n1", "n2", "n3"]);
});

after(async () => {
  for (const c of clients) c.close();
  await cluster?.stop();
});

/** The primary, once both replicas follow it (its ClusterStatus lists three nodes). */
async function settled(among?: string[]): Promise<{ primary: string; replicas: string[] }> {
  const primary = await cluster.primary(among);
  const c = client({ address: cluster.nodes.get(primary)!.address });
  await until(async () => (await c.clusterStatus()).length === (among?.length ?? 3), 30_000, "replicas following").catch(
    async (e: Error) => {
      const nodes = await Promise.all([...cluster.nodes.keys()].map(async (n) => [n, await cluster.own(n)] as const));
      const seen = nodes.map(([n, o]) => (o ? `${n} ${o.role} at ${o.appliedBookmark}` : `${n} down`)).join(", ");
      const tails = [...cluster.nodes].map(([n, s]) => `--- ${n}\n${s.output().split("\n").slice(-15).join("\n")}`);
      throw new Error(`${e.message} (${primary} primary; ${seen})\n${tails.join("\n")}`);
    },
  );
  const replicas = [...cluster.nodes.keys()].filter((n) => n !== primary && (among === undefined || among.includes(n)));
  return { primary, replicas };
}

test("a list of servers: writes find the primary, reads go where readFrom says", async () => {
  const { primary, replicas } = await settled();
  const at = (n: string) => cluster.nodes.get(n)!.address;

  // the primary last in the list: found by asking ClusterStatus
  const all = client(`${at(replicas[0]!)},${at(replicas[1]!)},${at(primary)}`);
  assert.deepEqual(all.servers, [at(replicas[0]!), at(replicas[1]!), at(primary)]);
  const ack = await all.publish("orders", Array.from({ length: 50 }, (_, i) => ({ orderId: i, qty: i })));
  assert.equal(ack.count, 50);
  assert.equal((await all.sow("orders").toArray()).length, 50); // readFrom "primary": already there

  // replicas only: the first write is refused naming the primary, and goes there
  const onlyReplicas = client({ address: [at(replicas[0]!), at(replicas[1]!)], readFrom: "any" });
  assert.equal((await onlyReplicas.publish("orders", [{ orderId: 100 }, { orderId: 101 }])).count, 2);
  assert.equal(await onlyReplicas.sowDelete("orders", { sowKeys: ["0"] }).then((r) => r.deletedCount), 1);
  assert.ok(onlyReplicas.servers.length === 2);
  // readFrom "any": served by the replicas, which follow (HA-2)
  await until(async () => (await onlyReplicas.sow("orders").toArray()).length === 51, 10_000, "the replicas' state");

  // readFrom "any" takes every node in turn; "primary" always the primary
  const anyNode = client({ address: [at("n1"), at("n2"), at("n3")], readFrom: "any" });
  const answered = new Set<string>();
  for (let i = 0; i < 3; i++) answered.add((await anyNode.clusterStatus())[0]!.node);
  assert.deepEqual([...answered].sort(), ["n1", "n2", "n3"]);
  for (let i = 0; i < 3; i++) assert.equal((await all.clusterStatus())[0]!.node, primary);

  // a bad list is refused before anything is dialed
  assert.throws(() => createClient("127.0.0.1:9007,"), { name: "RangeError", message: /separated by commas/ });
  assert.throws(() => createClient({ address: ["127.0.0.1:9007", "127.0.0.1:0"] }), {
    name: "RangeError",
    message: /from 1 to 65535/,
  });
});

/** (SowService/Sow calls, of them refused FAILED_PRECONDITION) as the node `name` counts them. */
async function sowCalls(name: string): Promise<[number, number]> {
  const c = client({ address: cluster.nodes.get(name)!.address });
  const rpc = (await c.stats()).server?.rpcs.find((r) => r.rpc === "SowService/Sow");
  return [Number(rpc?.calls ?? 0n), Number(rpc?.errors["FAILED_PRECONDITION"] ?? 0n)];
}

test("readFrom primary: a read never trusts a stale primary (a node that no longer leads refuses it)", async () => {
  const { primary, replicas } = await settled();
  const at = (n: string) => cluster.nodes.get(n)!.address;
  const reader = client([at(primary), ...replicas.map(at)]);
  await reader.sow("orders").toArray(); // the client now knows `primary` leads
  const to = replicas[0]!;
  const handed = spawnSync(python(), ["-m", "sowdb.main", "switchover", "--server", at(primary), "--to", to], {
    encoding: "utf8",
    timeout: 120_000,
  });
  assert.equal(handed.status, 0, `${handed.stderr}; the nodes' warnings:\n${warnings()}`);
  // following: it knows the new primary (a replica that knows none yet answers UNAVAILABLE)
  await until(
    async () => {
      const own = await cluster.own(primary);
      return own?.role === "replica" && own.following;
    },
    20_000,
    "the old primary following",
  );
  const [before, refusedBefore] = await sowCalls(primary);
  const [servedBefore] = await sowCalls(to);
  await reader.sow("orders").toArray();
  const [afterCalls, refusedAfter] = await sowCalls(primary);
  const [servedAfter] = await sowCalls(to);
  const seen = `${primary}: ${afterCalls - before} calls, ${refusedAfter - refusedBefore} refused; ${to}: ${
    servedAfter - servedBefore
  } calls; the nodes' warnings:\n${warnings()}`;
  assert.equal(afterCalls - before, 1, seen);
  assert.equal(refusedAfter - refusedBefore, 1, seen); // the old primary refused the read, naming `to`
  assert.equal(servedAfter - servedBefore, 1, seen); // which served it
});

test("examples/cluster.ts, as docs/node.md shows it, runs against the cluster", async () => {
  const source = readFileSync(join(import.meta.dirname, "..", "examples", "cluster.ts"), "utf8");
  const page = readFileSync(join(import.meta.dirname, "..", "..", "..", "docs", "node.md"), "utf8");
  assert.ok(page.includes("## A cluster of servers"));
  assert.equal(/## A cluster of servers[\s\S]*?```ts\n([\s\S]*?)```/.exec(page)?.[1], source);
  await settled();
  const run = spawnSync(process.execPath, [join(import.meta.dirname, "..", "examples", "cluster.ts")], {
    cwd: join(import.meta.dirname, ".."),
    env: { ...process.env, SOWDB_SERVERS: cluster.addresses().join(",") },
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.equal(run.status, 0, run.stderr);
  const lines = run.stdout.trim().split("\n");
  assert.match(lines[0]!, /^stored at bookmark \d+$/);
  assert.deepEqual(
    lines.slice(1).map((l) => l.replace(/^n\d /, "").replace(/\d+$/, "N")).sort(),
    ["is primary, applied N", "is replica, applied N", "is replica, applied N"],
  );
});

test("keepalives: a connection gone silent fails its subscription in seconds, not never", async () => {
  const proxy = await SilentProxy.start(cluster.nodes.get("n1")!.address);
  try {
    const c = client({ address: proxy.address, keepaliveMs: 1000, keepaliveTimeoutMs: 1000 });
    const it = c.subscribe("orders")[Symbol.asyncIterator]();
    await eventsUntil(it, (e) => e.kind === "subscribed");
    await proxy.goSilent();
    const started = Date.now();
    const failed = await (async () => {
      try {
        for (;;) if ((await it.next()).done) return undefined;
      } catch (e) {
        return e;
      }
    })();
    assert.ok(failed instanceof SowdbError, `the subscription ended without an error: ${String(failed)}`);
    assert.ok(Date.now() - started < 10_000, `noticed after ${Date.now() - started} ms`);
  } finally {
    await proxy.close();
  }
});

test("keepalives on a quiet stream: the server accepts the pings (no GOAWAY too_many_pings)", async () => {
  // a publish stream that sends nothing for 4.5 s gets a PING a second; gRPC's default policy
  // would end the connection after the third (ENHANCE_YOUR_CALM), sowd accepts them
  async function* slowly() {
    yield { orderId: 5_000_001 };
    await new Promise((r) => setTimeout(r, 4500));
    yield { orderId: 5_000_002 };
  }
  const primary = await cluster.primary();
  const w = client({ address: cluster.nodes.get(primary)!.address, keepaliveMs: 1000 });
  assert.equal((await w.publish("orders", slowly(), { batchSize: 1 })).count, 2);
});

/** Every node's warnings and errors, for a failure's message (a fallback to acknowledging
 * alone, a stalled follower, a fork). */
function warnings(): string {
  return [...cluster.nodes]
    .map(([n, s]) => `--- ${n}\n${s.output().split("\n").filter((l) => / (WARNING|ERROR) /.test(l)).slice(-20).join("\n")}`)
    .join("\n");
}

/** A subscription to `orders` from now on, and what it delivers. */
function subscriber(c: SowdbClient) {
  const out = {
    delivered: [] as { bookmark: bigint; id: number }[],
    from: -1n,
    sub: c.subscribe<{ orderId: number }>("orders"),
    consumed: Promise.resolve(),
    error: undefined as unknown,
  };
  out.consumed = (async () => {
    try {
      for await (const e of out.sub) {
        if (e.kind === "subscribed") out.from = e.bookmark;
        if (e.kind === "publish") for (const r of e.records) out.delivered.push({ bookmark: r.bookmark, id: r.data.orderId });
      }
    } catch (e) {
      out.error = e; // checked by the test
    }
  })();
  return out;
}

test("kill -9 of the primary under sync load: writes go on, each once; subscriptions resume, no gap, no duplicate", async () => {
  const { primary: old, replicas } = await settled();
  const list = cluster.addresses();
  const writer = client({ address: list });
  // subscribers: on the primary (readFrom "primary": on `old`), and on any node (the one it is
  // on may be `old` or a replica, which goes on following the new primary)
  const subscribers = [subscriber(client(list.join(","))), subscriber(client({ address: list, readFrom: "any" }))];
  const delivered = subscribers[0]!.delivered;
  // and a mirror (sowAndSubscribe): resumed as the query as of its bookmark, then live (H-3)
  const mirror = new Mirror<{ orderId: number }>();
  const mirrored: bigint[] = [];
  const mirrorSub = client(list).sowAndSubscribe<{ orderId: number }>("orders");
  let mirrorError: unknown;
  const mirroring = (async () => {
    try {
      for await (const e of mirrorSub) {
        mirror.apply(e);
        if (e.kind === "publish") mirrored.push(...e.records.map((r) => r.bookmark));
      }
    } catch (e) {
      mirrorError = e;
    }
  })();
  await until(() => subscribers.every((s) => s.from >= 0n) && mirror.ready, 10_000, "subscribed");

  const acknowledged: number[] = [];
  let stop = false;
  async function load(w: number): Promise<void> {
    for (let i = w * 1_000_000; !stop; i += 20) {
      const ids = Array.from({ length: 20 }, (_, k) => i + k);
      const ack = await writer.publish("orders", ids.map((orderId) => ({ orderId, w })));
      assert.equal(ack.count, 20);
      acknowledged.push(...ids);
    }
  }
  const loads = [load(1), load(2)];
  await until(() => acknowledged.length >= 400 && delivered.length >= 400, 30_000, "load before the kill");
  await cluster.kill9(old);
  const killed = Date.now();
  const before = acknowledged.length;
  await until(() => acknowledged.length >= before + 400, 30_000, "acknowledgements by the new primary");
  const failover = Date.now() - killed;
  stop = true;
  await Promise.all(loads); // no publish failed: each was retried on the new primary
  const { primary } = await settled(replicas);
  const last = acknowledged.length;
  for (const [n, s] of subscribers.entries()) {
    const all = () => s.error !== undefined || new Set(s.delivered.map((d) => d.id)).size >= last;
    await until(all, 30_000, "every write delivered").catch(
      async (e: Error) => {
        const nodes = await Promise.all(replicas.map((r) => cluster.own(r)));
        const applied = nodes.map((o) => `${o?.node} ${o?.role} ${o?.appliedBookmark}`).join(", ");
        const got = `${new Set(s.delivered.map((d) => d.id)).size} of ${last} ids, last ${s.delivered.at(-1)?.bookmark}`;
        throw new Error(`${e.message}: subscriber ${n} delivered ${got}; nodes: ${applied}; error ${s.error}`);
      },
    );
  }
  const state = await client({ address: cluster.nodes.get(primary)!.address }).sow<{ orderId: number }>("orders").toArray();
  await until(() => mirrorError !== undefined || mirror.size >= state.length, 30_000, "the mirror holds every write");
  for (const s of subscribers) s.sub.cancel();
  mirrorSub.cancel();
  await Promise.all([...subscribers.map((s) => s.consumed), mirroring]);

  // the journal of `orders` on the new primary: the check of what was delivered and applied
  const check = client({ address: cluster.nodes.get(primary)!.address });
  const journal: { bookmark: bigint; id: number }[] = [];
  const replay = check.subscribe<{ orderId: number }>("orders", { bookmark: "0" })[Symbol.asyncIterator]();
  for (const e of await eventsUntil(replay, (e) => e.kind === "completed", 30_000)) {
    if (e.kind === "publish") for (const r of e.records) journal.push({ bookmark: r.bookmark, id: r.data.orderId });
  }
  await replay.return?.();

  // no gap, no duplicate: what the subscriber got is the journal after its point, entry for entry
  for (const [n, { delivered, from, error }] of subscribers.entries()) {
    assert.equal(error, undefined, `subscriber ${n} failed; the nodes' warnings:\n${warnings()}`);
    const upTo = delivered.at(-1)!.bookmark;
    const expected = journal.filter((j) => j.bookmark > from && j.bookmark <= upTo);
    const at = delivered.findIndex((d, i) => d.bookmark !== expected[i]?.bookmark || d.id !== expected[i]?.id);
    const near = (xs: typeof delivered, i: number) =>
      JSON.stringify(xs.slice(Math.max(0, i - 3), i + 4), (_, v) => (typeof v === "bigint" ? Number(v) : v));
    assert.ok(
      at === -1 && delivered.length === expected.length,
      `subscriber ${n}: its records are not the journal's from #${at} of ${delivered.length} (journal ` +
        `${expected.length}): delivered ${near(delivered, at)}, journal ${near(expected, at)}`,
    );
  }
  // the mirror: every live record once, in order, and the state of the new primary
  // (a DATA_LOSS SUBSCRIPTION_FORKED here would say that its query showed a write no replica
  // held: a sync primary shows a query's results once the replicas hold its bookmark)
  assert.equal(mirrorError, undefined, `the mirror failed; the nodes' warnings:\n${warnings()}`);
  assert.ok(mirrored.every((b, i) => i === 0 || b > mirrored[i - 1]!), "the mirror's bookmarks rise");
  assert.deepEqual(
    [...mirror.records()].map((r) => r.bookmark).sort(),
    state.map((r) => r.bookmark).sort(),
    "the mirror holds the new primary's state",
  );
  assert.ok(failover < (LEASE_TTL_S + 15) * 1000, `the first acknowledgement came ${failover} ms after the kill`);
  // every acknowledged write is there (sync: nothing lost), and once: a publish the old primary
  // applied and replicated whose answer the kill lost is sent again to the new primary, which
  // knows it as a duplicate only if the producer state (J-4) is replicated (HA-2)
  const times = new Map<number, number>();
  for (const j of journal) times.set(j.id, (times.get(j.id) ?? 0) + 1);
  assert.deepEqual(
    acknowledged.filter((id) => times.get(id) !== 1),
    [],
    "acknowledged writes missing or applied twice",
  );
});

test("a publish whose answer was lost is sent again and applied once (J-4 producer ids)", async () => {
  // one server behind two proxies, the client's list; while one publish streams, the link turns
  // slow after its first request (3 s a chunk, either way): the next requests are applied, but
  // their answers would come after the keepalive (1 s) has found the connection dead, so they
  // are lost; once the link is fast again, the client sends what was not answered again on a
  // new connection
  const sowd = await startSowd();
  const proxies = [await SilentProxy.start(sowd.address), await SilentProxy.start(sowd.address)];
  try {
    const c = client({ address: proxies.map((p) => p.address), keepaliveMs: 1000, keepaliveTimeoutMs: 1000 });
    const check = client({ address: sowd.address });
    const stored = async (id: number) => (await check.sow("orders", { filter: `/orderId = ${id}` }).toArray()).length === 1;
    let go!: () => void;
    const cut = new Promise<void>((r) => (go = r));
    async function* docs() {
      yield { orderId: 1 };
      await cut;
      yield { orderId: 2 };
      yield { orderId: 3 };
    }
    const publishing = c.publish("orders", docs(), { batchSize: 1 });
    await until(() => stored(1), 10_000, "the first request applied");
    await Promise.all(proxies.map((p) => p.slow(3)));
    go();
    await until(() => stored(3), 20_000, "the requests after the slowdown applied");
    await Promise.all(proxies.map((p) => p.back()));
    const ack = await publishing;
    assert.equal(ack.count, 3); // a duplicate's answer counts the messages it holds
    const replay = check.subscribe<{ orderId: number }>("orders", { bookmark: "0" })[Symbol.asyncIterator]();
    const ids: number[] = [];
    for (const e of await eventsUntil(replay, (e) => e.kind === "completed")) {
      if (e.kind === "publish") ids.push(...e.records.map((r) => r.data.orderId));
    }
    await replay.return?.();
    assert.deepEqual(ids, [1, 2, 3], "each request is in the journal once");
    const calls = (await check.stats()).server!.rpcs.find((r) => r.rpc.endsWith("/Publish"))?.calls;
    assert.ok(calls !== undefined && calls >= 2n, `the requests were sent again (Publish calls: ${calls})`);
  } finally {
    await Promise.all(proxies.map((p) => p.close()));
    await sowd.stop();
  }
});
