/**
 * The client: `createClient({ address, token?, tls? })`.
 *
 * One client is one HTTP/2 connection (gRPC over connect-node's `createGrpcTransport`); every
 * call of the client goes over it, which is what lets `replaceSubscription` find a
 * subscription placed by the same client.
 */
import { readFileSync } from "node:fs";
import type * as http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
import { type Client as ConnectClient, type Interceptor, createClient as createConnectClient } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import {
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus,
  Health,
} from "./gen/grpc/health/v1/health_pb.js";
import { AdminService, StatsRequestSchema, type StatsResponse } from "./gen/sowdb/v1/admin_pb.js";
import {
  Durability,
  ListTopicsRequestSchema,
  type PublishRequest,
  PublishRequestSchema,
  type PublishMessage,
  type PublishResponse,
  type SowAndSubscribeResponse,
  SowDeleteRequestSchema,
  SowService,
  type SubscribeResponse,
  type SowResponse,
  type TopicInfo as PbTopicInfo,
  TopicKind,
} from "./gen/sowdb/v1/sow_pb.js";
import { baseUrlOf } from "./address.js";
import { PublishError, SowdbError, fromStatus, toSowdbError } from "./errors.js";
import { type SowEvent, eventFromPb } from "./events.js";
import {
  type CallOptions,
  DEFAULT_ADDRESS,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_PUBLISH_BATCH,
  type PublishAck,
  type PublishItem,
  type PublishOptions,
  type ReplaceOptions,
  type SowAndSubscribeOptions,
  type SowDeleteOptions,
  type SowDeleteResult,
  type SowOptions,
  type SowRecord,
  type StatsOptions,
  type SubscribeOptions,
  type TopicInfo,
  durationMs,
  encodeJson,
  publishMessage,
  recordsFromPb,
  replaceRequest,
  sowAndSubscribeRequest,
  sowRequest,
  subscribeRequest,
} from "./types.js";

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

export interface ClientOptions {
  /** `host:port` (default `127.0.0.1:9007`), or a URL `http://host:port` / `https://host:port`. */
  address?: string;
  /** Sent as `authorization: Bearer TOKEN` metadata on every call (SPEC §11). */
  token?: string;
  /** TLS for the channel (SPEC §11); off by default. */
  tls?: TlsOptions;
  /** The largest gRPC message sent or received (default 16 MiB). */
  maxMessageBytes?: number;
}

/** A `sow` query's result: iterate it (`for await`) for the records. */
export class SowResult<T = any> implements AsyncIterable<SowRecord<T>> {
  /** Set when the `group_begin` frame has arrived: the query id and the point the query sees. */
  groupBegin: { queryId: string; bookmark: bigint } | undefined;
  /** Set when the `group_end` frame has arrived: the counts. */
  groupEnd: { queryId: string; recordsReturned: number; recordsMatched: number; recordsScanned: number } | undefined;
  private started = false;

  constructor(
    private readonly open: () => AsyncIterable<SowResponse>,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /** The records, one batch (one response frame) at a time. */
  async *batches(): AsyncGenerator<SowRecord<T>[], void, undefined> {
    if (this.started) throw new Error("a sow result can be iterated once");
    this.started = true;
    try {
      for await (const resp of this.open()) {
        const e = resp.event;
        if (e.case === "records") yield recordsFromPb<T>(e.value.records);
        else if (e.case === "groupBegin") this.groupBegin = { queryId: e.value.queryId, bookmark: e.value.bookmark };
        else if (e.case === "groupEnd")
          this.groupEnd = {
            queryId: e.value.queryId,
            recordsReturned: Number(e.value.recordsReturned),
            recordsMatched: Number(e.value.recordsMatched),
            recordsScanned: Number(e.value.recordsScanned),
          };
      }
    } catch (err) {
      if (this.signal?.aborted) return;
      throw toSowdbError(err);
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<SowRecord<T>, void, undefined> {
    for await (const batch of this.batches()) yield* batch;
  }

  /** Every record, in one array. */
  async toArray(): Promise<SowRecord<T>[]> {
    const out: SowRecord<T>[] = [];
    for await (const batch of this.batches()) for (const r of batch) out.push(r);
    return out;
  }
}

/**
 * A live subscription: iterate it (`for await`) for {@link SowEvent}s. It ends when the
 * caller's `signal` aborts, on {@link Subscription.cancel}, or when the loop is left
 * (`break`); in each case the server drops the subscription.
 */
export class Subscription<T = any> implements AsyncIterable<SowEvent<T>> {
  /** The subscription id, set once the `subscribed` event has arrived. */
  subId = "";
  private started = false;

  constructor(
    private readonly open: () => AsyncIterable<SowEvent<T>>,
    private readonly controller: AbortController,
  ) {}

  async *[Symbol.asyncIterator](): AsyncGenerator<SowEvent<T>, void, undefined> {
    if (this.started) throw new Error("a subscription can be iterated once");
    this.started = true;
    try {
      for await (const event of this.open()) {
        if (event.kind === "subscribed") this.subId = event.subId;
        yield event;
      }
    } catch (err) {
      if (this.controller.signal.aborted) return;
      throw toSowdbError(err);
    } finally {
      this.controller.abort();
    }
  }

  /** Ends the subscription; a running `for await` loop over it finishes. */
  cancel(): void {
    this.controller.abort();
  }
}

/** A connection to a sowdb server. Create it with {@link createClient}. */
export class SowdbClient {
  /** The address as given (or the default). */
  readonly address: string;
  private readonly session: Http2SessionManager;
  private readonly rpc: ConnectClient<typeof SowService>;
  private readonly admin: ConnectClient<typeof AdminService>;
  private readonly health: ConnectClient<typeof Health>;
  /** Aborted by close(): every call's signal follows it. */
  private readonly closing = new AbortController();

  constructor(opts: ClientOptions = {}) {
    this.address = opts.address ?? DEFAULT_ADDRESS;
    const tls = opts.tls ?? false;
    const baseUrl = baseUrlOf(this.address, tls !== false);
    const nodeOptions = tlsNodeOptions(tls);
    this.session = new Http2SessionManager(baseUrl, {}, nodeOptions);
    const interceptors: Interceptor[] = [];
    if (opts.token !== undefined) interceptors.push(bearer(opts.token));
    const max = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.session,
      interceptors,
      readMaxBytes: max,
      writeMaxBytes: max,
    });
    this.rpc = createConnectClient(SowService, transport);
    this.admin = createConnectClient(AdminService, transport);
    this.health = createConnectClient(Health, transport);
  }

  /** Round-trip time in milliseconds of a `grpc.health.v1` check of the service. */
  async ping(opts: CallOptions = {}): Promise<number> {
    const start = performance.now();
    const resp = await this.unary(() =>
      this.health.check(create(HealthCheckRequestSchema, { service: SERVICE_NAME }), {
        signal: this.signal(opts.signal),
        timeoutMs: opts.timeoutMs ?? 5000,
      }),
    );
    if (resp.status !== HealthCheckResponse_ServingStatus.SERVING) {
      throw new SowdbError({ code: "UNAVAILABLE", message: "server is not serving" });
    }
    return performance.now() - start;
  }

  /**
   * Publishes documents in atomic batches of `batchSize` (default 100) over one bidi stream,
   * and resolves once every batch is acknowledged.
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
    const batchSize = opts.batchSize ?? DEFAULT_PUBLISH_BATCH;
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError("batchSize must be at least 1");
    const delta = opts.delta ?? false;
    const sizes: number[] = [];
    let stop = false; // set at the first refusal: send nothing more
    const request = (messages: PublishMessage[]): PublishRequest =>
      create(PublishRequestSchema, { topic, messages, delta, correlationId: String(sizes.length), stopOnError: true });

    let inputError: { error: unknown } | undefined; // thrown by `docs` or by encoding a document
    async function* requests(): AsyncGenerator<PublishRequest> {
      let batch: PublishMessage[] = [];
      try {
        if (Symbol.iterator in docs) {
          for (const item of docs) {
            batch.push(publishMessage(item));
            if (batch.length >= batchSize) {
              if (stop) return;
              const req = request(batch);
              sizes.push(batch.length);
              batch = [];
              yield req;
            }
          }
        } else {
          for await (const item of docs) {
            batch.push(publishMessage(item));
            if (batch.length >= batchSize) {
              if (stop) return;
              const req = request(batch);
              sizes.push(batch.length);
              batch = [];
              yield req;
            }
          }
        }
      } catch (error) {
        // end the stream cleanly (the requests sent are answered), then rethrow it as it is
        inputError = { error };
        stop = true;
        return;
      }
      if (batch.length > 0 && !stop) {
        const req = request(batch);
        sizes.push(batch.length);
        yield req;
      }
    }

    let i = 0;
    let stored = 0;
    let first = 0n;
    let last = 0n;
    let refused: { resp: PublishResponse; batch: number; offset: number } | undefined;
    try {
      for await (const resp of this.rpc.publish(requests(), { signal: this.signal(opts.signal), timeoutMs: opts.timeoutMs })) {
        const size = sizes[i] ?? 0;
        if (resp.error !== undefined) {
          if (refused === undefined) {
            refused = { resp, batch: i, offset: stored };
            stop = true;
          }
        } else if (refused === undefined) {
          if (first === 0n) first = resp.firstBookmark;
          last = resp.lastBookmark;
          stored += size;
        }
        i++;
      }
    } catch (err) {
      throw toSowdbError(err);
    }
    if (inputError !== undefined && refused === undefined) throw inputError.error;
    if (refused !== undefined && refused.resp.error !== undefined) {
      const base = fromStatus(refused.resp.error);
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

  /**
   * Queries the state of a topic (or of every topic a regex matches): iterate the result for
   * its records. `batchSize` defaults to 10.
   */
  sow<T = any>(topic: string, opts: SowOptions = {}): SowResult<T> {
    const req = sowRequest(topic, opts);
    const signal = this.signal(opts.signal);
    return new SowResult<T>(() => this.rpc.sow(req, { signal, timeoutMs: opts.timeoutMs }), signal);
  }

  /**
   * Queries and subscribes at one atomic point (S-1): `subscribed`, `group_begin`, `sow`
   * batches, `group_end`, then live `publish` / `oof` events (feed them to a {@link Mirror}).
   */
  sowAndSubscribe<T = any>(topic: string, opts: SowAndSubscribeOptions = {}): Subscription<T> {
    const req = sowAndSubscribeRequest(topic, opts);
    const controller = linked(this.signal(opts.signal));
    return new Subscription<T>(
      () => this.events<T>(this.rpc.sowAndSubscribe(req, { signal: controller.signal, timeoutMs: opts.timeoutMs })),
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
    return new Subscription<T>(
      () => this.events<T>(this.rpc.subscribe(req, { signal: controller.signal, timeoutMs: opts.timeoutMs })),
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
    const resp = await this.unary(() =>
      this.rpc.replaceSubscription(req, { signal: this.signal(opts.signal), timeoutMs: opts.timeoutMs }),
    );
    return resp.bookmark;
  }

  /** Deletes by exactly one of `filter`, `sowKeys` or `data`; resolves to the count deleted. */
  async sowDelete(topic: string, opts: SowDeleteOptions = {}): Promise<SowDeleteResult> {
    const req = create(SowDeleteRequestSchema, {
      topic,
      filter: opts.filter ?? "",
      sowKeys: opts.sowKeys ?? [],
      data: opts.data === undefined ? new Uint8Array() : encodeJson(opts.data),
    });
    const resp = await this.unary(() => this.rpc.sowDelete(req, { signal: this.signal(opts.signal), timeoutMs: opts.timeoutMs }));
    return { deletedCount: Number(resp.deletedCount), bookmark: resp.bookmark };
  }

  /** The configured topics with kind, key, durability, history and record count. */
  async listTopics(opts: CallOptions = {}): Promise<TopicInfo[]> {
    const resp = await this.unary(() =>
      this.rpc.listTopics(create(ListTopicsRequestSchema), {
        signal: this.signal(opts.signal),
        timeoutMs: opts.timeoutMs,
      }),
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
    return this.unary(() => this.admin.stats(req, { signal: this.signal(opts.signal), timeoutMs: opts.timeoutMs }));
  }

  /**
   * Closes the client: calls still open are cancelled (subscriptions and queries end quietly,
   * unary calls and publishes reject with `CANCELLED`), then the connection is closed with an
   * HTTP/2 GOAWAY NO_ERROR. Calls made afterwards fail with `CANCELLED`.
   */
  close(): void {
    if (this.closing.signal.aborted) return;
    this.closing.abort(new SowdbError({ code: "CANCELLED", message: "the client was closed" }));
    // connect-node's public Http2SessionManager.abort() ends the connection with GOAWAY CANCEL,
    // which gRPC servers log as an error; close the session it holds gracefully when it is
    // there (the calls above are already cancelled, so nothing keeps it open).
    const conn = (this.session as unknown as { s?: { conn?: http2.ClientHttp2Session } }).s?.conn;
    if (conn !== undefined && !conn.destroyed && !conn.closed) conn.close();
    else this.session.abort();
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

  private async *events<T>(
    responses: AsyncIterable<SowAndSubscribeResponse | SubscribeResponse>,
  ): AsyncGenerator<SowEvent<T>> {
    for await (const resp of responses) {
      const event = eventFromPb<T>(resp);
      if (event !== undefined) yield event;
    }
  }
}

/** Connects to a sowdb server (the connection opens on the first call).
 *
 * @throws RangeError the address is not `host:port`, or its port is out of 1..65535.
 */
export function createClient(opts: ClientOptions = {}): SowdbClient {
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

/** An AbortController that also aborts when `parent` does. */
function linked(parent: AbortSignal | undefined): AbortController {
  const c = new AbortController();
  if (parent === undefined) return c;
  if (parent.aborted) c.abort(parent.reason);
  else parent.addEventListener("abort", () => c.abort(parent.reason), { once: true, signal: c.signal });
  return c;
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
