/**
 * `publish`: documents in atomic requests of `batchSize` (each also under the client's gRPC
 * message limit, `maxMessageBytes`) over one bidi stream, and, in a cluster
 * (SPEC §13, HA-5), the same stream opened again on the primary found after a failover, sending
 * again every request that was not answered.
 *
 * A request sent again may already have been applied (the old primary wrote it, and a replica
 * holds it, but the answer was lost with the connection): each request therefore carries a J-4
 * producer id and a sequence number, fixed when the request is made, and the server answers a
 * request whose sequence it has applied as a `duplicate` without applying it again. A client
 * given a list of servers uses generated producer ids; a caller may name its own
 * (`producerId`).
 */
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import {
  type PublishMessage,
  type PublishRequest,
  PublishRequestSchema,
  type PublishResponse,
} from "./gen/sowdb/v1/sow_pb.js";
import { PublishError, type SowdbError, fromStatus, toSowdbError } from "./errors.js";
import { type FailoverSettings, failedOn, gaveUp, isFailover } from "./failover.js";
import { type Nodes, linked, pause } from "./nodes.js";
import { DEFAULT_PUBLISH_BATCH, type PublishAck, type PublishItem, type PublishOptions, publishMessage } from "./types.js";

/** One J-4 producer while a publish holds it: its id and the next sequence number. */
interface Producer {
  readonly id: string;
  last: bigint;
}

/**
 * The producers of one client. A producer applies its requests in sequence order, so two
 * publishes never share one at the same time: a generated producer is lent to one publish at
 * a time (a client running N publishes at once makes N of them, and reuses them after, so the
 * server's table of producers grows by a few per client, not one per call), and publishes that
 * name the same `producerId` run one after the other.
 *
 * Sequences are the time in microseconds, or the last one plus one when that is not above it:
 * they keep rising across restarts of a process that names the same producer id (the server
 * keeps its last sequence forever, and would answer a restarted count as duplicates).
 */
export class Producers {
  private readonly base = randomUUID();
  private readonly idle: Producer[] = [];
  private made = 0;
  private readonly named = new Map<string, { producer: Producer; turn: Promise<void> }>();

  /** A producer for one publish, and its release (call it when the publish ends). */
  async acquire(id: string | undefined): Promise<[Producer, () => void]> {
    if (id === undefined) {
      const p = this.idle.pop() ?? { id: `${this.base}-${this.made++}`, last: 0n };
      return [p, () => this.idle.push(p)];
    }
    const held = this.named.get(id) ?? { producer: { id, last: 0n }, turn: Promise.resolve() };
    const before = held.turn;
    let release!: () => void;
    held.turn = new Promise<void>((r) => (release = r));
    this.named.set(id, held);
    await before;
    return [held.producer, release];
  }
}

/** The next sequence number of `p`. */
function nextSeq(p: Producer): bigint {
  const now = BigInt(Date.now()) * 1000n;
  p.last = now > p.last ? now : p.last + 1n;
  return p.last;
}

/** A request made, and how many messages it holds. */
interface Sent {
  req: PublishRequest;
  size: number;
}

/**
 * The requests of one publish: made from `docs` as they are needed, kept until answered, so
 * that a stream opened again after a failover sends the unanswered ones again, in order, then
 * goes on with `docs`.
 */
class Feed {
  readonly sent: Sent[] = [];
  /** How many of `sent` are answered. */
  answered = 0;
  /** Set at the first refusal: send nothing more. */
  stop = false;
  /** The error `docs` (or encoding a document) threw. */
  inputError: { error: unknown } | undefined;
  private readonly items: Iterator<PublishItem> | AsyncIterator<PublishItem>;
  private readonly sync: boolean;
  private exhausted = false;
  private chain: Promise<unknown> = Promise.resolve();
  /** A message that did not fit its request's bytes: the first of the next request. */
  private pending: PublishMessage | undefined;

  /** `room`: the bytes of messages one request may hold (under the gRPC message limit). */
  constructor(
    docs: Iterable<PublishItem> | AsyncIterable<PublishItem>,
    private readonly make: (messages: PublishMessage[], index: number) => PublishRequest,
    private readonly batchSize: number,
    private readonly room: number,
  ) {
    this.sync = Symbol.iterator in docs;
    this.items = Symbol.iterator in docs ? docs[Symbol.iterator]() : docs[Symbol.asyncIterator]();
  }

  /** The requests of one stream: the unanswered ones again, then new ones. */
  async *requests(): AsyncGenerator<PublishRequest> {
    let cursor = this.answered;
    for (;;) {
      if (this.stop) return;
      if (cursor < this.sent.length) yield this.sent[cursor++]!.req;
      else if (!(await this.more())) return;
    }
  }

  /** Makes the next request; false when `docs` is done. One at a time: a stream abandoned
   * while it waited on `docs` leaves its request here for the next stream. */
  private more(): Promise<boolean> {
    const made = this.chain.then(() => this.fetch());
    this.chain = made.catch(() => undefined);
    return made;
  }

  private async fetch(): Promise<boolean> {
    if (this.exhausted) return false;
    const batch: PublishMessage[] = [];
    let used = 0;
    try {
      while (batch.length < this.batchSize) {
        let msg = this.pending;
        this.pending = undefined;
        if (msg === undefined) {
          const r = this.sync ? (this.items as Iterator<PublishItem>).next() : await this.items.next();
          if (r.done) {
            this.exhausted = true;
            break;
          }
          msg = publishMessage(r.value);
        }
        const size = messageBytes(msg);
        if (batch.length > 0 && used + size > this.room) {
          // 30 documents of 900 KB each fit max_document_bytes, not one 16 MiB request together;
          // a message over the limit alone goes alone (and is refused by its size)
          this.pending = msg;
          break;
        }
        batch.push(msg);
        used += size;
      }
    } catch (error) {
      // end the stream cleanly (the requests sent are answered), then rethrow it as it is
      this.inputError = { error };
      this.stop = this.exhausted = true;
      return false;
    }
    if (batch.length === 0 || this.stop) return false;
    this.sent.push({ req: this.make(batch, this.sent.length), size: batch.length });
    return true;
  }

  /** Lets a generator of `docs` that is not done run its `finally` blocks. */
  async close(): Promise<void> {
    if (!this.exhausted) {
      this.exhausted = true;
      await this.items.return?.();
    }
  }
}

/** Where a publish goes and how its failures are handled. */
export interface PublishContext {
  nodes: Nodes;
  failover: FailoverSettings;
  producers: Producers;
  signal: AbortSignal;
  /** The client's gRPC message limit: each request stays under it. */
  maxMessageBytes: number;
}

/** Bytes of a request's limit kept for what is not a message (topic, producer id, framing). */
const REQUEST_HEADROOM = 4096;

/** A message's bytes inside a request: its data and SowKey, and room for its framing and expiration. */
function messageBytes(m: PublishMessage): number {
  return m.data.length + Buffer.byteLength(m.sowKey) + 32;
}

/** Pause before the next try after a failover failure. */
const RETRY_PAUSE_MS = 100;

/** See {@link SowdbClient.publish}. */
export async function publish(
  ctx: PublishContext,
  topic: string,
  docs: Iterable<PublishItem> | AsyncIterable<PublishItem>,
  opts: PublishOptions,
): Promise<PublishAck> {
  const batchSize = opts.batchSize ?? DEFAULT_PUBLISH_BATCH;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError("batchSize must be at least 1");
  const delta = opts.delta ?? false;
  const { nodes, failover, signal } = ctx;
  const [producer, release] =
    nodes.cluster || opts.producerId !== undefined ? await ctx.producers.acquire(opts.producerId) : [undefined, () => {}];
  const feed = new Feed(
    docs,
    (messages, index) =>
      create(PublishRequestSchema, {
        topic,
        messages,
        delta,
        correlationId: String(index),
        stopOnError: true,
        ...(producer === undefined ? {} : { producerId: producer.id, producerSeq: nextSeq(producer) }),
      }),
    batchSize,
    ctx.maxMessageBytes - REQUEST_HEADROOM - Buffer.byteLength(topic) - Buffer.byteLength(producer?.id ?? ""),
  );
  let stored = 0;
  let first = 0n;
  let last = 0n;
  let refused: { resp: PublishResponse; batch: number; offset: number } | undefined;
  let deadline = Date.now() + failover.timeoutMs; // of the current failover: from the last answer
  try {
    for (;;) {
      const channel = await nodes.findPrimary(signal, deadline, true);
      const attempt = linked(signal); // aborted when left: a refusal to fail over from ends the call
      try {
        for await (const resp of channel.rpc.publish(feed.requests(), { signal: attempt.signal, timeoutMs: opts.timeoutMs })) {
          if (refused !== undefined) continue; // after a refusal: nothing more counts
          const size = feed.sent[feed.answered]?.size ?? 0;
          if (resp.error !== undefined) {
            const e = fromStatus(resp.error);
            if (nodes.cluster && isFailover(e)) throw e; // not applied here: sent again on the primary
            refused = { resp, batch: feed.answered, offset: stored };
            feed.stop = true;
            continue;
          }
          feed.answered++;
          deadline = Date.now() + failover.timeoutMs;
          stored += size;
          if (!resp.duplicate) {
            if (first === 0n) first = resp.firstBookmark;
            last = resp.lastBookmark;
          }
        }
        break;
      } catch (err) {
        attempt.abort(); // before the pause: a stream left open would go on taking requests
        const e = toSowdbError(err);
        if (!nodes.cluster || signal.aborted || feed.inputError !== undefined || !isFailover(e)) throw e;
        failedOn(nodes, channel, e);
        if (Date.now() >= deadline) throw gaveUp(`publish to ${topic}`, failover.timeoutMs, e);
        await pause(RETRY_PAUSE_MS, signal);
      } finally {
        attempt.abort();
      }
    }
  } catch (err) {
    throw toSowdbError(err);
  } finally {
    release();
    await feed.close();
  }
  if (feed.inputError !== undefined && refused === undefined) throw feed.inputError.error;
  if (refused !== undefined && refused.resp.error !== undefined) {
    const base: SowdbError = fromStatus(refused.resp.error);
    const index = base.metadata["message_index"];
    throw new PublishError(base, {
      batchIndex: refused.batch,
      messageIndex: index ? refused.offset + Number(index) : undefined,
      stored,
      firstBookmark: first,
      lastBookmark: last,
    });
  }
  return { count: stored, firstBookmark: first, lastBookmark: last };
}
