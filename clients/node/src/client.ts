/**
 * The client: `createClient({ address, token?, tls? })`.
 *
 * One client is one HTTP/2 connection per server (gRPC over connect-node's
 * `createGrpcTransport`); every call of the client to a server goes over its connection, which
 * is what lets `replaceSubscription` find a subscription placed by the same client. Given a list
 * of servers (SPEC §13, HA-5), writes go to the primary and follow it across failovers, reads go
 * to the primary or to any node (`readFrom`), and subscriptions resume after a failover (see
 * nodes.ts, failover.ts, publish.ts, resume.ts).
 */
import { readFileSync } from "node:fs";
import type * as http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { HealthCheckRequestSchema, HealthCheckResponse_ServingStatus } from "./gen/grpc/health/v1/health_pb.js";
import { ClusterStatusRequestSchema, StatsRequestSchema, type StatsResponse } from "./gen/sowdb/v1/admin_pb.js";
import {
  Durability,
  ListTopicsRequestSchema,
  SowDeleteRequestSchema,
  type TopicInfo as PbTopicInfo,
  TopicKind,
} from "./gen/sowdb/v1/sow_pb.js";
import { addressList } from "./address.js";
import { SowdbError, toSowdbError } from "./errors.js";
import { type SowEvent, eventFromPb } from "./events.js";
import { type FailoverSettings, onPrimary, onReader } from "./failover.js";
import { type Channel, Nodes, linked } from "./nodes.js";
import { Producers, publish } from "./publish.js";
import { type Opener, type ResumePlan, resumable } from "./resume.js";
import { SowResult, Subscription } from "./streams.js";
import {
  type CallOptions,
  DEFAULT_ADDRESS,
  DEFAULT_MAX_MESSAGE_BYTES,
  type PublishAck,
  type PublishItem,
  type PublishOptions,
  type ReplaceOptions,
  type SowAndSubscribeOptions,
  type SowDeleteOptions,
  type SowDeleteResult,
  type SowOptions,
  type StatsOptions,
  type SubscribeOptions,
  type TopicInfo,
  durationMs,
  encodeJson,
  publishMessage,
  replaceRequest,
  sowAndSubscribeRequest,
  sowKeysOf,
  sowRequest,
  subscribeRequest,
} from "./types.js";

/** The trailing metadata in which a NOT_SERVING health check says why. */
const NOT_SERVING_KEY = "sowdb-not-serving";

/** The service name the health check asks about. */
export const SERVICE_NAME = "sowdb.v1.SowService";

/** TLS settings: `true` for the system's CAs, or a CA (PEM text or bytes, or a file path). */
export type TlsOptions =
  | boolean
  | {
      /** The CA certificate(s) that signed the server's: PEM bytes, or a path to a PEM file. */
      ca?: Buffer | Uint8Array | string;
      /** A client certificate and key for mutual TLS: PEM bytes or file paths. */
      cert?: Buffer | Uint8Array | string;
      key?: Buffer | Uint8Array | string;
      /** The name to verify the server's certificate against (default: the address's host). */
      servername?: string;
    };

/** How long a call looks for a server that serves it after a failover, by default. */
export const DEFAULT_FAILOVER_TIMEOUT_MS = 30_000;
/** HTTP/2 PINGs on a connection with open calls, by default (gRPC's `keepalive_time_ms`), as
 * the Python SDK's; a PING unanswered as long drops the connection (`keepalive_timeout_ms`). */
export const DEFAULT_KEEPALIVE_MS = 5_000;
/** The shortest PING interval: the server answers faster PINGs with GOAWAY (its ping policy). */
export const MIN_KEEPALIVE_MS = 1_000;

/** One node of a cluster, as `clusterStatus` gives it (SPEC §13, HA-6). */
export interface ClusterNode {
  /** Its name (`[cluster] node`). */
  node: string;
  /** The address it serves on (`[cluster] advertise`). */
  address: string;
  /** `"primary"` or `"replica"`. */
  role: string;
  /** The epoch it leads at or follows (0 while it knows none). */
  epoch: bigint;
  /** The last bookmark it has applied. */
  appliedBookmark: bigint;
  /** How many bookmarks it trails the primary by (known only while it follows). */
  lag: bigint;
  /** A member of the sync set: it holds every acknowledged write and may be promoted. */
  sync: boolean;
  /** A replica: a stream from the primary delivers to it now (it knows the primary). */
  following: boolean;
  /** A replica that does not follow: why its last attempt failed (empty while it follows). */
  followError: string;
}

export interface ClientOptions {
  /**
   * `host:port` (default `127.0.0.1:9007`), or a URL `http://host:port` / `https://host:port`;
   * or the servers of a cluster (SPEC §13): `"h1:9007,h2:9007,h3:9007"` or an array of them.
   */
  address?: string | string[];
  /**
   * With a list of servers: how long a call keeps looking for a server that serves it (the
   * primary found again after a failover, a node that has applied a subscription's bookmark),
   * in milliseconds, before it fails with the last error; default 30 s. Counted from the last
   * answer, so a long publish gets it for each failover.
   */
  failoverTimeoutMs?: number;
  /**
   * With a list of servers: where queries, subscriptions, `listTopics`, `stats` and `ping` go:
   * `"primary"` (default), or `"any"` node (replicas serve every read, HA-2; a node is picked
   * in turn).
   */
  readFrom?: "primary" | "any";
  /**
   * HTTP/2 PING interval on a connection with open calls, in milliseconds (gRPC's
   * `keepalive_time_ms`); a PING unanswered for `keepaliveTimeoutMs` drops the connection, so
   * a server gone silent (a partition, a blackholed host) fails the calls (or, with a list of
   * servers, moves them to another node) instead of hanging them. Default 5 s, at least 1 s
   * (the server refuses faster PINGs); 0 sends none.
   */
  keepaliveMs?: number;
  /** How long a PING may go unanswered, in milliseconds (`keepalive_timeout_ms`); default `keepaliveMs`. */
  keepaliveTimeoutMs?: number;
  /** Sent as `authorization: Bearer TOKEN` metadata on every call (SPEC §11). */
  token?: string;
  /** TLS for the channel (SPEC §11); off by default. */
  tls?: TlsOptions;
  /** The largest gRPC message sent or received (default 16 MiB). */
  maxMessageBytes?: number;
}

/** A connection to a sowdb server. Create it with {@link createClient}. */
export class SowdbClient {
  /** The address as given (a list joined with commas), or the default. */
  readonly address: string;
  /** The servers, as given. */
  readonly servers: readonly string[];
  private readonly nodes: Nodes;
  private readonly failover: FailoverSettings;
  private readonly producers = new Producers();
  /** The node each live subscription of this client runs on, by id (for replaceSubscription). */
  private readonly placed = new Map<string, Channel>();
  /** Aborted by close(): every call's signal follows it. */
  private readonly closing = new AbortController();
  /** The largest gRPC message sent: a publish's requests stay under it. */
  private readonly maxMessageBytes: number;

  constructor(opts: ClientOptions | string | string[] = {}) {
    if (typeof opts === "string" || Array.isArray(opts)) opts = { address: opts };
    const tls = opts.tls ?? false;
    this.maxMessageBytes = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.servers = addressList(opts.address ?? DEFAULT_ADDRESS, tls !== false);
    this.address = typeof opts.address === "string" ? opts.address : this.servers.join(",");
    const readFrom = opts.readFrom ?? "primary";
    if (readFrom !== "primary" && readFrom !== "any") {
      throw new RangeError(`readFrom must be "primary" or "any", not ${JSON.stringify(readFrom)}`);
    }
    const interceptors: Interceptor[] = [];
    if (opts.token !== undefined) interceptors.push(bearer(opts.token));
    if (readFrom === "primary" && this.servers.length > 1) interceptors.push(primaryReads());
    const keepaliveMs = opts.keepaliveMs ?? DEFAULT_KEEPALIVE_MS;
    if (keepaliveMs !== 0 && !(keepaliveMs >= MIN_KEEPALIVE_MS)) {
      throw new RangeError(`keepaliveMs must be 0 (none) or at least ${MIN_KEEPALIVE_MS} (the server refuses faster pings)`);
    }
    this.nodes = new Nodes([...this.servers], {
      tls: tls !== false,
      nodeOptions: tlsNodeOptions(tls),
      interceptors,
      maxMessageBytes: this.maxMessageBytes,
      keepaliveMs,
      keepaliveTimeoutMs: opts.keepaliveTimeoutMs ?? keepaliveMs,
    });
    const timeoutMs = opts.failoverTimeoutMs ?? DEFAULT_FAILOVER_TIMEOUT_MS;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
      throw new RangeError("failoverTimeoutMs must be a non-negative number");
    }
    this.failover = { timeoutMs, readFrom };
  }

  /**
   * Round-trip time in milliseconds of a `grpc.health.v1` check of the service. A server that
   * is not serving fails it with UNAVAILABLE and its reason (e.g. `starting: 120000 of 500000
   * records loaded` while it loads its state).
   */
  async ping(opts: CallOptions = {}): Promise<number> {
    const start = performance.now();
    const signal = this.signal(opts.signal);
    let why: string | null = null;
    const resp = await onReader(this.nodes, this.failover, signal, "ping", (c) =>
      c.health.check(create(HealthCheckRequestSchema, { service: SERVICE_NAME }), {
        signal,
        timeoutMs: opts.timeoutMs ?? 5000,
        onTrailer: (trailers) => (why = trailers.get(NOT_SERVING_KEY)),
      }),
    );
    if (resp.status !== HealthCheckResponse_ServingStatus.SERVING) {
      throw new SowdbError({ code: "UNAVAILABLE", message: why ?? "server is not serving" });
    }
    return performance.now() - start;
  }

  /**
   * Publishes documents in atomic batches of `batchSize` (default 100; a batch is cut short
   * where the next document would take it over `maxMessageBytes`) over one bidi stream, and
   * resolves once every batch is acknowledged.
   *
   * Documents are plain objects (sent as `JSON.stringify` gives them), JSON text, UTF-8 bytes,
   * or {@link Message}s for a SowKey or time to live; `docs` may be any iterable or async
   * iterable.
   *
   * @throws PublishError a batch was refused: nothing of it is stored, the earlier batches
   *   (`stored` messages) are; no batch is sent after it. `messageIndex` counts from the first
   *   message of this call.
   * @throws SowdbError the call failed.
   * @throws the error `docs` threw, or that encoding a document threw (a `BigInt` in it, a
   *   cycle): sending stops there, the batches sent before it are stored.
   */
  async publish(
    topic: string,
    docs: Iterable<PublishItem> | AsyncIterable<PublishItem>,
    opts: PublishOptions = {},
  ): Promise<PublishAck> {
    const ctx = {
      nodes: this.nodes,
      failover: this.failover,
      producers: this.producers,
      signal: this.signal(opts.signal),
      maxMessageBytes: this.maxMessageBytes,
    };
    return publish(ctx, topic, docs, opts);
  }

  /**
   * Queries the state of a topic (or of every topic a regex matches): iterate the result for
   * its records. `batchSize` defaults to 10.
   */
  sow<T = any>(topic: string, opts: SowOptions = {}): SowResult<T> {
    const req = sowRequest(topic, opts);
    const signal = this.signal(opts.signal);
    return new SowResult<T>(() => this.read(signal, (c) => c.rpc.sow(req, { signal, timeoutMs: opts.timeoutMs })), signal);
  }

  /**
   * Queries and subscribes at one atomic point (S-1): `subscribed`, `group_begin`, `sow`
   * batches, `group_end`, then live `publish` / `oof` events (feed them to a {@link Mirror}).
   */
  sowAndSubscribe<T = any>(topic: string, opts: SowAndSubscribeOptions = {}): Subscription<T> {
    const req = sowAndSubscribeRequest(topic, opts);
    const controller = linked(this.signal(opts.signal));
    const signal = controller.signal;
    const resumes =
      opts.topN === undefined && opts.skipN === undefined && !opts.grouping?.length && opts.conflationMs === undefined;
    return new Subscription<T>(
      () =>
        this.subscription<T>(
          (c, bookmark, subId, attempt) =>
            c.rpc.sowAndSubscribe(bookmark === undefined ? req : { ...req, query: { ...req.query!, bookmark }, subId }, {
              signal: attempt,
              timeoutMs: opts.timeoutMs,
            }),
          { query: true, resumable: resumes, bookmark: undefined, subId: req.subId },
          signal,
        ),
      controller,
    );
  }

  /**
   * Subscribes to every later message of a topic (or regex); with `bookmark`, first replays
   * the journal after it, then sends `completed` (H-4).
   */
  subscribe<T = any>(topic: string, opts: SubscribeOptions = {}): Subscription<T> {
    const req = subscribeRequest(topic, opts);
    const controller = linked(this.signal(opts.signal));
    const signal = controller.signal;
    return new Subscription<T>(
      () =>
        this.subscription<T>(
          (c, bookmark, subId, attempt) =>
            c.rpc.subscribe(bookmark === undefined ? req : { ...req, bookmark, subId }, {
              signal: attempt,
              timeoutMs: opts.timeoutMs,
            }),
          { query: false, resumable: true, bookmark: req.bookmark || undefined, subId: req.subId },
          signal,
        ),
      controller,
    );
  }

  /**
   * a new filter and options for a live subscription of this client; records newly in
   * scope arrive on its stream, records leaving it get an oof. A paginated subscription takes
   * its page again (`topN`, `skipN`, `orderBy`). Resolves to the bookmark at which the change
   * took effect.
   *
   * @throws SowdbError `NOT_FOUND`: no such subscription on this client's connection.
   */
  async replaceSubscription(subId: string, opts: ReplaceOptions = {}): Promise<bigint> {
    const req = replaceRequest(subId, opts);
    const signal = this.signal(opts.signal);
    const call = (c: Channel) => c.rpc.replaceSubscription(req, { signal, timeoutMs: opts.timeoutMs });
    const node = this.placed.get(subId);
    const resp =
      node !== undefined
        ? await this.unary(() => call(node)) // on the node the subscription runs on
        : await onReader(this.nodes, this.failover, signal, "replaceSubscription", call);
    return resp.bookmark;
  }

  /** Deletes by exactly one of `filter`, `sowKeys` or `data`; resolves to the count deleted. */
  async sowDelete(topic: string, opts: SowDeleteOptions = {}): Promise<SowDeleteResult> {
    const req = create(SowDeleteRequestSchema, {
      topic,
      filter: opts.filter ?? "",
      sowKeys: sowKeysOf(opts.sowKeys),
      data: opts.data === undefined ? new Uint8Array() : encodeJson(opts.data),
    });
    const signal = this.signal(opts.signal);
    const resp = await onPrimary(
      this.nodes,
      this.failover,
      signal,
      `sowDelete on ${topic}`,
      (c) => c.rpc.sowDelete(req, { signal, timeoutMs: opts.timeoutMs }),
      true,
    );
    return { deletedCount: Number(resp.deletedCount), bookmark: resp.bookmark };
  }

  /** The configured topics with kind, key, durability, history and record count. */
  async listTopics(opts: CallOptions = {}): Promise<TopicInfo[]> {
    const signal = this.signal(opts.signal);
    const resp = await onReader(this.nodes, this.failover, signal, "listTopics", (c) =>
      c.rpc.listTopics(create(ListTopicsRequestSchema), { signal, timeoutMs: opts.timeoutMs }),
    );
    return resp.topics.map(topicInfo);
  }

  /**
   * The server's figures (SPEC §12), taken at one point: per topic (records, publishes, deletes,
   * bytes, subscriptions), the live subscriptions with their queues, and server-wide figures
   * (journal, disk, calls per RPC with errors by code, CPU and memory). Counts are `bigint`s, as
   * protobuf-es gives 64-bit integers.
   *
   * `topic` (a name or a regex) narrows the topics and subscriptions. With security on, a user
   * without an admin role asks with `topicsOnly: true`: the topics it may read and its own
   * subscriptions, without the server-wide figures.
   *
   * @throws SowdbError `PERMISSION_DENIED`: server-wide figures without an admin role, or a topic
   *   named that the user may not read.
   */
  async stats(opts: StatsOptions = {}): Promise<StatsResponse> {
    const req = create(StatsRequestSchema, { topic: opts.topic ?? "", topicsOnly: opts.topicsOnly ?? false });
    const signal = this.signal(opts.signal);
    return onReader(this.nodes, this.failover, signal, "stats", (c) =>
      c.admin.stats(req, { signal, timeoutMs: opts.timeoutMs }),
    );
  }

  /**
   * HA-6: the cluster as the node asked sees it (`readFrom` picks the node): that node first,
   * then, on the primary, each replica following it, with role, epoch, applied bookmark and
   * lag (bookmarks and counts are `bigint`s). With security on it takes an admin.
   *
   * @throws SowdbError `FAILED_PRECONDITION`: the server runs alone (no `[cluster]`).
   */
  async clusterStatus(opts: CallOptions = {}): Promise<ClusterNode[]> {
    const signal = this.signal(opts.signal);
    const resp = await onReader(this.nodes, this.failover, signal, "clusterStatus", (c) =>
      c.admin.clusterStatus(create(ClusterStatusRequestSchema), { signal, timeoutMs: opts.timeoutMs }),
    );
    return resp.nodes.map((n) => ({
      node: n.node,
      address: n.address,
      role: n.role,
      epoch: n.epoch,
      appliedBookmark: n.appliedBookmark,
      lag: n.lag,
      sync: n.sync,
      following: n.following,
      followError: n.followError,
    }));
  }

  /**
   * Closes the client: calls still open are cancelled (subscriptions and queries end quietly,
   * unary calls and publishes reject with `CANCELLED`), then each connection is closed with an
   * HTTP/2 GOAWAY NO_ERROR. Calls made afterwards fail with `CANCELLED`.
   */
  close(): void {
    if (this.closing.signal.aborted) return;
    this.closing.abort(new SowdbError({ code: "CANCELLED", message: "the client was closed" }));
    this.nodes.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /** The signal of one call: the caller's, and the client's own (aborted by close()). */
  private signal(callers: AbortSignal | undefined): AbortSignal {
    return callers === undefined ? this.closing.signal : AbortSignal.any([callers, this.closing.signal]);
  }

  private async unary<R>(call: () => Promise<R>): Promise<R> {
    try {
      return await call();
    } catch (err) {
      throw toSowdbError(err);
    }
  }

  /**
   * A read stream where `readFrom` sends it. In a cluster, a node that fails before its first
   * answer (down, or no primary yet) is given up for the next, until the failover timeout; a
   * failure after it ends the stream.
   */
  private async *read<R>(signal: AbortSignal, open: (c: Channel) => AsyncIterable<R>): AsyncGenerator<R> {
    let answered = false;
    let first: R | undefined;
    const it = await onReader(this.nodes, this.failover, signal, "query", async (c) => {
      const stream = open(c)[Symbol.asyncIterator]();
      const r = await stream.next();
      answered = !r.done;
      first = r.done ? undefined : r.value;
      return stream;
    });
    if (!answered) return;
    yield first!;
    yield* { [Symbol.asyncIterator]: () => it };
  }

  /** A subscription's events: on the one server, or resumed across failovers in a cluster. */
  private async *subscription<T>(open: Opener, plan: ResumePlan, signal: AbortSignal): AsyncGenerator<SowEvent<T>> {
    if (!this.nodes.cluster) {
      const c = this.nodes.channels[0]!;
      for await (const resp of open(c, undefined, plan.subId, signal)) {
        const event = eventFromPb<T>(resp);
        if (event !== undefined) yield event;
      }
      return;
    }
    let subId = "";
    const first =
      this.failover.readFrom === "primary"
        ? await onPrimary(this.nodes, this.failover, signal, "subscribe", async (c) => c)
        : this.nodes.rotation()[0]!;
    try {
      yield* resumable<T>(this.nodes, this.failover, signal, first, open, plan, (c, id) => {
        subId = id;
        this.placed.set(id, c);
      });
    } finally {
      this.placed.delete(subId);
    }
  }
}

/** Connects to a sowdb server, or to the servers of a cluster (connections open on first use):
 * `createClient({ address })`, or `createClient("h1:9007,h2:9007,h3:9007")` for the address alone.
 *
 * @throws RangeError an address is not `host:port`, or its port is out of 1..65535.
 */
export function createClient(opts: ClientOptions | string | string[] = {}): SowdbClient {
  return new SowdbClient(opts);
}

function pem(v: Buffer | Uint8Array | string): Buffer {
  if (typeof v !== "string") return Buffer.from(v);
  return v.includes("-----BEGIN") ? Buffer.from(v) : readFileSync(v);
}

function tlsNodeOptions(tls: TlsOptions): http2.SecureClientSessionOptions | undefined {
  if (tls === false || tls === true) return undefined;
  const o: http2.SecureClientSessionOptions = {};
  if (tls.ca !== undefined) o.ca = pem(tls.ca);
  if (tls.cert !== undefined) o.cert = pem(tls.cert);
  if (tls.key !== undefined) o.key = pem(tls.key);
  if (tls.servername !== undefined) o.servername = tls.servername;
  return o;
}

function bearer(token: string): Interceptor {
  const value = `Bearer ${token}`;
  return (next) => (req) => {
    req.header.set("authorization", value);
    return next(req);
  };
}

/** The reads that must be served by the primary under `readFrom: "primary"`. */
const PRIMARY_READS = new Set(["Sow", "SowAndSubscribe", "Subscribe"]);

/**
 * Marks each read of {@link PRIMARY_READS} `sowdb-read-from: primary`: a node that is not the
 * primary refuses it naming the primary (FAILED_PRECONDITION, NOT_PRIMARY), as it refuses a
 * write, and the read goes there; a stale idea of the primary (an old primary back as a
 * replica) never answers it.
 */
function primaryReads(): Interceptor {
  return (next) => (req) => {
    if (PRIMARY_READS.has(req.method.name)) req.header.set("sowdb-read-from", "primary");
    return next(req);
  };
}

const KINDS: Record<number, TopicInfo["kind"]> = {
  [TopicKind.SOW]: "sow",
  [TopicKind.VIEW]: "view",
  [TopicKind.CONFLATED]: "conflated",
};
const DURABILITIES: Record<number, TopicInfo["durability"]> = {
  [Durability.PERSISTENT]: "persistent",
  [Durability.TRANSIENT]: "transient",
};

function topicInfo(t: PbTopicInfo): TopicInfo {
  return {
    name: t.name,
    kind: KINDS[t.kind] ?? "unspecified",
    key: [...t.key],
    durability: DURABILITIES[t.durability] ?? "unspecified",
    history:
      t.history === undefined
        ? undefined
        : { windowMs: durationMs(t.history.window), granularityMs: durationMs(t.history.granularity) },
    recordCount: Number(t.recordCount),
    indexes: [...t.indexes],
    underlying: t.underlying,
    expirationMs: durationMs(t.expiration),
  };
}
