/**
 * A subscription that outlives its server (SPEC §13, HA-5): when the node it streams from dies
 * or the cluster fails over, it is placed again, on a node that has applied the last bookmark
 * it delivered, from that bookmark, so that the caller's stream goes on with no gap and no
 * duplicate.
 *
 * The node is chosen by its own `ClusterStatus` row (applied bookmark; the primary only, unless
 * `readFrom: "any"`): a node behind the bookmark would give live changes the caller has seen.
 * Where `ClusterStatus` is refused (a user who is not an admin), the node's own answer tells:
 * a bookmark after its latest is refused (`INVALID_ARGUMENT`), and its `subscribed` bookmark is
 * its latest; a node behind is left, and the resume tried again until the failover timeout.
 * The new stream is a bookmark subscription (H-4: the journal after the bookmark, then live),
 * or for `sowAndSubscribe` the query as of the bookmark with its live changes after it (H-3),
 * whose query frames the caller already has: they are not passed on, nor are the new stream's
 * `subscribed` and a second `completed`. Records at or before the last delivered bookmark are
 * dropped, should a node send one.
 *
 * The new stream starts one bookmark earlier, and its first record must be the last one
 * delivered (same bookmark and timestamp): a primary that died may have sent its subscribers
 * entries no replica had (it never acknowledged them to their publishers), which the new primary
 * replaced with others at the same bookmarks. Such a subscription ends with `DATA_LOSS` rather
 * than go on from a history that is not the cluster's.
 */
import type { SowAndSubscribeResponse, SubscribeResponse } from "./gen/sowdb/v1/sow_pb.js";
import { SowdbError, toSowdbError } from "./errors.js";
import { type SowEvent, eventFromPb } from "./events.js";
import type { SowRecord } from "./types.js";
import { type FailoverSettings, gaveUp, isFailover } from "./failover.js";
import { type Channel, type Nodes, linked, pause } from "./nodes.js";

/** Opens the stream on `channel`; `bookmark` set: placed again from there (a resume). The call
 * must end when `signal` aborts: it is how a stream the SDK leaves (a node found behind) is
 * cancelled, since leaving a Connect stream's loop does not cancel its call. */
export type Opener = (
  channel: Channel,
  bookmark: string | undefined,
  subId: string,
  signal: AbortSignal,
) => AsyncIterable<SowAndSubscribeResponse | SubscribeResponse>;

/** How a subscription is resumed. */
export interface ResumePlan {
  /** `sowAndSubscribe`: resumable only once its query is delivered (group_end). */
  query: boolean;
  /** False for what cannot be placed again from a bookmark (pages, aggregates, conflation). */
  resumable: boolean;
  /** The bookmark the caller asked for (a replay), if any. */
  bookmark: string | undefined;
  /** The caller's subscription id ("": the server's, kept from the first stream). */
  subId: string;
}

/** The events of a subscription across failovers; `onNode` is told each node it runs on. */
export async function* resumable<T>(
  nodes: Nodes,
  failover: FailoverSettings,
  signal: AbortSignal,
  first: Channel,
  open: Opener,
  plan: ResumePlan,
  onNode: (channel: Channel, subId: string) => void,
): AsyncGenerator<SowEvent<T>> {
  let channel = first;
  let subId = plan.subId;
  let from: string | undefined = plan.bookmark; // where a resume starts
  let delivered = -1n; // the last record bookmark passed on (-1: none)
  let deliveredUs = 0; // and its timestamp
  let verify = false; // a resumed stream's first record must be that one again
  let live = !plan.query; // the query's frames are all delivered
  let yielded = false;
  let completed = false;
  let resumed = false;
  let deadline = 0; // of the current resume
  for (;;) {
    // each stream has its own signal, aborted when it is left: a stream the SDK abandons (its
    // node is behind) would otherwise stay open, and hold its sub_id on the node it is retried on
    const attempt = linked(signal);
    try {
      const at: string | undefined = !resumed ? plan.bookmark : verify ? (delivered - 1n).toString() : from;
      const stream: AsyncIterable<SowAndSubscribeResponse | SubscribeResponse> = open(channel, at, subId, attempt.signal);
      for await (const resp of stream) {
        const event: SowEvent<T> | undefined = eventFromPb<T>(resp);
        if (event === undefined) continue;
        switch (event.kind) {
          case "subscribed":
            if (resumed && delivered >= 0n && event.bookmark < delivered) throw behind(event.bookmark, delivered);
            if (!subId) subId = event.subId;
            onNode(channel, subId);
            if (!plan.query && from === undefined) from = event.bookmark.toString();
            if (resumed) continue;
            break;
          case "group_begin":
          case "sow":
            if (resumed) continue;
            if (event.kind === "group_begin") from = event.bookmark.toString();
            break;
          case "group_end":
            live = true;
            if (resumed) continue;
            break;
          case "completed":
            if (completed) continue;
            completed = true;
            break;
          case "publish":
          case "deleted":
          case "oof": {
            if (verify) {
              const again: SowRecord<T> | undefined = event.records[0];
              if (again?.bookmark !== delivered || again.timestampUs !== deliveredUs) {
                throw forked(delivered, again?.bookmark);
              }
              verify = false;
            }
            const fresh = event.records.filter((r) => r.bookmark > delivered);
            if (fresh.length === 0) continue;
            if (fresh.length < event.records.length) {
              if (event.kind === "oof") continue;
              event.records = fresh;
            }
            delivered = fresh[fresh.length - 1]!.bookmark;
            deliveredUs = fresh[fresh.length - 1]!.timestampUs;
            from = delivered.toString();
            break;
          }
          default:
            break;
        }
        yielded = true;
        deadline = 0;
        yield event;
      }
      return;
    } catch (err) {
      attempt.abort(); // before any pause: the node has that long to drop it
      const e = toSowdbError(err);
      const behindHere = resumed && (e.reason === BEHIND || (e.code === "INVALID_ARGUMENT" && AFTER_LATEST.test(e.message)));
      if (signal.aborted || !(isFailover(e) || behindHere) || !plan.resumable) throw e;
      if (plan.query && !live && yielded) throw e; // part of a query delivered: cannot go on
      if (deadline === 0) deadline = Date.now() + failover.timeoutMs;
      if (behindHere) {
        if (Date.now() >= deadline) throw gaveUp(`a subscription (up to bookmark ${delivered})`, failover.timeoutMs, e);
        await pause(RETRY_PAUSE_MS, signal);
      }
      channel = await resumeOn(nodes, failover, signal, delivered, e, deadline);
      resumed = yielded && from !== undefined;
      verify = resumed && delivered > 0n;
    } finally {
      attempt.abort();
    }
  }
}

/** The node to go on from, or the error that says none could. */
async function resumeOn(
  nodes: Nodes,
  failover: FailoverSettings,
  signal: AbortSignal,
  delivered: bigint,
  cause: SowdbError,
  deadline: number,
): Promise<Channel> {
  const found = await nodes.holding(delivered < 0n ? 0n : delivered, failover.readFrom === "primary", signal, deadline);
  if (signal.aborted) throw cause;
  if (found === undefined) {
    const what = delivered < 0n ? "a subscription" : `a subscription (delivered up to bookmark ${delivered})`;
    throw gaveUp(what, failover.timeoutMs, cause);
  }
  return found;
}

/** How a node refuses a bookmark it has not applied yet (H-4). */
const AFTER_LATEST = /after the latest/;
/** The reason of the error that leaves a node found behind the subscription's bookmark. */
const BEHIND = "SDK_NODE_BEHIND";
/** Pause before asking again for a node that has applied the bookmark. */
const RETRY_PAUSE_MS = 100;

function forked(delivered: bigint, found: bigint | undefined): SowdbError {
  return new SowdbError({
    code: "DATA_LOSS",
    reason: "SUBSCRIPTION_FORKED",
    message:
      `this subscription delivered bookmark ${delivered} from a node that then failed, and the cluster holds another ` +
      `entry there (${found === undefined ? "none" : `bookmark ${found} comes first`}): what it delivered last was ` +
      "never replicated nor acknowledged to its publisher; subscribe again for the cluster's state",
  });
}

function behind(latest: bigint, delivered: bigint): SowdbError {
  return new SowdbError({
    code: "UNAVAILABLE",
    reason: BEHIND,
    message: `the node's latest bookmark ${latest} is behind bookmark ${delivered}, which this subscription delivered`,
  });
}
