/**
 * The resume loop's own bookkeeping (SPEC §13, HA-5), with scripted streams in place of a
 * cluster: what a failover test on real processes meets only by chance. Leaving a Connect
 * stream's `for await` loop does not cancel its call, so a stream the SDK abandons (its node
 * has not shown the delivered bookmark yet) stayed open on the node, holding the subscription's
 * sub_id there: the retry on that node was refused ("sub_id ... is already in use") and the
 * subscription ended. Each stream now has its own signal, aborted when the SDK leaves it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { type SubscribeResponse, SubscribeResponseSchema } from "@sowdb/client/gen/sowdb/v1/sow_pb";
import type { Channel, Nodes } from "../dist/nodes.js";
import { type Opener, resumable } from "../dist/resume.js";

const channel = { address: "127.0.0.1:1" } as Channel;
/** Every resume lands on the same node: the one whose hub would hold a stream left open. */
const nodes = { holding: async () => channel } as unknown as Nodes;
const failover = { timeoutMs: 5_000, readFrom: "primary" as const };

function subscribed(bookmark: bigint): SubscribeResponse {
  return create(SubscribeResponseSchema, { event: { case: "subscribed", value: { subId: "s1", bookmark } } });
}

function publish(...bookmarks: bigint[]): SubscribeResponse {
  const records = bookmarks.map((b) => ({
    topic: "orders",
    sowKey: `k${b}`,
    bookmark: b,
    timestamp: timestampFromMs(Number(b)),
    data: new TextEncoder().encode(`{"id":${b}}`),
  }));
  return create(SubscribeResponseSchema, { event: { case: "publish", value: { records } } });
}

/** Until `signal` aborts, as a server's live stream with nothing to send. */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

test("a stream the SDK leaves (its node is behind) is cancelled before the subscription is placed again", async () => {
  const open: { bookmark: string | undefined; ended: boolean }[] = [];
  const opener: Opener = (_channel, bookmark, _subId, signal) => {
    const attempt = { bookmark, ended: false };
    open.push(attempt);
    // the node drops the subscription once the call is cancelled, whatever the loop over it does
    signal?.addEventListener("abort", () => (attempt.ended = true), { once: true });
    const n = open.length;
    const it = (async function* () {
      try {
        if (n === 1) {
          // the first node delivers bookmarks 10 and 11, then dies
          yield subscribed(9n);
          yield publish(10n, 11n);
          throw new ConnectError("the node is gone", Code.Unavailable);
        }
        if (n === 2) {
          // the node has not shown bookmark 11 yet: the SDK leaves this stream and retries
          yield subscribed(10n);
          await aborted(signal);
          return;
        }
        assert.ok(open[1]!.ended, "the stream left for a node behind is still open when the next one opens");
        yield subscribed(11n);
        yield publish(11n, 12n); // the last delivered again (verified), then what is new
        await aborted(signal);
      } finally {
        attempt.ended = true;
      }
    })();
    // as Connect's streams are: no return(), so leaving a loop over one does not end it
    return { [Symbol.asyncIterator]: () => ({ next: () => it.next() }) };
  };
  const controller = new AbortController();
  const delivered: bigint[] = [];
  const events = resumable(nodes, failover, controller.signal, channel, opener, {
    query: false,
    resumable: true,
    bookmark: undefined,
    subId: "",
  }, () => {});
  for await (const e of events) {
    if (e.kind === "publish") delivered.push(...e.records.map((r) => r.bookmark));
    if (delivered.at(-1) === 12n) break;
  }
  controller.abort();
  assert.deepEqual(delivered, [10n, 11n, 12n], "no gap, no duplicate across the two resumes");
  assert.deepEqual(
    open.map((o) => o.bookmark),
    [undefined, "10", "10"],
    "placed again one bookmark before the last delivered",
  );
  assert.ok(open.every((o) => o.ended), "every stream the subscription opened is closed once it ends");
});
