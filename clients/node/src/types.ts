/**
 * The SDK's value types, its options, and the conversions between them and the generated
 * protobuf messages.
 *
 * Bookmarks (one choice, used everywhere): every bookmark the SDK returns — on records,
 * events, acks, errors — is a `bigint` (the journal sequence number, a protobuf uint64). A
 * request's `bookmark` option takes a `bigint` (or a safe-integer `number`), or a `string`
 * the server parses: a sequence number (`"10001"`), `"0"` (the epoch: replay everything
 * retained), `"now"`, a UTC time `"20260102T150405Z"` (fractions `.ffffff` allowed) or any
 * ISO-8601 time; a `Date` is sent as its ISO-8601 text.
 */
import { create } from "@bufbuild/protobuf";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import {
  type PublishMessage,
  PublishMessageSchema,
  type Record as PbRecord,
  ReplaceSubscriptionRequestSchema,
  type ReplaceSubscriptionRequest,
  SowAndSubscribeRequestSchema,
  type SowAndSubscribeRequest,
  SowRequestSchema,
  type SowRequest,
  SubscribeRequestSchema,
  type SubscribeRequest,
  type SubscriptionOptions as PbSubscriptionOptions,
  SubscriptionOptionsSchema,
} from "./gen/sowdb/v1/sow_pb.js";

/** The server the SDK talks to when `address` is not given. */
export const DEFAULT_ADDRESS = "127.0.0.1:9007";
/** Records per query response when the caller does not say (Q-6: the SDK default is 10). */
export const DEFAULT_BATCH_SIZE = 10;
/** Messages per publish request (one atomic batch) when the caller does not say. */
export const DEFAULT_PUBLISH_BATCH = 100;
/** The largest gRPC message sent or received, as the Python SDK. */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** A bookmark as a request option takes it; see the module comment. */
export type BookmarkInput = bigint | number | string | Date;

/**
 * A record as received: a SOW record of a query, or a live (or replayed) message.
 *
 * `data` is the JSON document, parsed (`T` is `any` unless you name your document type:
 * `client.sow<Order>("orders")`). For delta subscriptions it holds the key fields and the
 * changed fields only.
 */
export class SowRecord<T = any> {
  constructor(
    /** The topic the record belongs to (useful with regex topics). */
    readonly topic: string,
    /** The record's identity within its topic (K-1): opaque, stable. */
    readonly sowKey: string,
    /** The journal sequence number of the change that produced this version. */
    readonly bookmark: bigint,
    /** When the server applied that change: microseconds since the epoch (UTC). */
    readonly timestampUs: number,
    /** The parsed JSON document. */
    readonly data: T,
  ) {}

  /** When the server applied the change that produced this version (millisecond precision). */
  get timestamp(): Date {
    return new Date(Math.floor(this.timestampUs / 1000));
  }
}

const decoder = new TextDecoder();

/** Microseconds since the epoch of a protobuf Timestamp (0 when absent). */
export function timestampUs(ts: Timestamp | undefined): number {
  return ts === undefined ? 0 : Number(ts.seconds) * 1_000_000 + Math.floor(ts.nanos / 1000);
}

/** The SDK record for a protobuf record: parses its JSON. */
export function recordFromPb<T>(r: PbRecord): SowRecord<T> {
  return new SowRecord<T>(r.topic, r.sowKey, r.bookmark, timestampUs(r.timestamp), parseJson(r.data) as T);
}

/** Records of a batch. */
export function recordsFromPb<T>(records: PbRecord[]): SowRecord<T>[] {
  const out = new Array<SowRecord<T>>(records.length);
  for (let i = 0; i < records.length; i++) out[i] = recordFromPb<T>(records[i]!);
  return out;
}

/** Parses JSON bytes (an empty document, as a delete may carry, is `null`). */
export function parseJson(bytes: Uint8Array): unknown {
  return bytes.length === 0 ? null : JSON.parse(decoder.decode(bytes));
}

/** The wire text of a bookmark option ("" when absent). */
export function bookmarkText(b: BookmarkInput | undefined): string {
  if (b === undefined) return "";
  if (typeof b === "bigint") {
    if (b < 0n) throw new RangeError(`bookmark must not be negative: ${b}`);
    return b.toString();
  }
  if (typeof b === "number") {
    if (!Number.isSafeInteger(b) || b < 0) throw new RangeError(`bookmark must be a non-negative integer: ${b}`);
    return String(b);
  }
  if (b instanceof Date) return b.toISOString();
  return b;
}

/** Milliseconds as a protobuf Duration. */
export function durationFromMs(ms: number): Duration {
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`a duration must be a non-negative number of ms: ${ms}`);
  const whole = Math.floor(ms / 1000);
  return { $typeName: "google.protobuf.Duration", seconds: BigInt(whole), nanos: Math.round((ms - whole * 1000) * 1e6) };
}

/** A protobuf Duration in milliseconds (0 when absent). */
export function durationMs(d: Duration | undefined): number {
  return d === undefined ? 0 : Number(d.seconds) * 1000 + d.nanos / 1e6;
}

// ---------------------------------------------------------------------------------------------
// Options

/** Options every call takes. */
export interface CallOptions {
  /**
   * Cancels the call. A stream (`sow`, `sowAndSubscribe`, `subscribe`) whose signal is aborted
   * ends quietly — its `for await` loop simply finishes — and the server drops the
   * subscription; a unary call rejects with a `SowdbError` of code `CANCELLED`.
   */
  signal?: AbortSignal;
  /**
   * A deadline for the whole call, in milliseconds (sent as gRPC's `grpc-timeout`); when it
   * passes the call fails with `DEADLINE_EXCEEDED`. For a subscription it bounds the stream's
   * whole life.
   */
  timeoutMs?: number;
}

/** The query part of `sow` and `sowAndSubscribe` (SPEC §4). */
export interface QueryOptions {
  /** A filter expression (FILTERS.md); empty matches every record. */
  filter?: string;
  /** `"/field [ASC|DESC], ..."`. */
  orderBy?: string;
  /** Return at most this many records. */
  topN?: number;
  /** Skip this many first; requires `topN`. */
  skipN?: number;
  /** Records per response, 1..10000; default 10. */
  batchSize?: number;
  /** Restrict the query to these SowKeys; an empty array is refused (it names none). */
  sowKeys?: string[];
  /** Echoed in `group_begin` and `group_end`. */
  queryId?: string;
  /** The state as of this point (H-2); see {@link BookmarkInput}. */
  bookmark?: BookmarkInput;
  /** Grouping expressions of an aggregated query; requires `projection`. */
  grouping?: string[];
  /** Projection expressions of an aggregated query; requires `grouping`. */
  projection?: string[];
  /** Fields to return, `"[-/,+/a,+/b/c]"`. */
  select?: string;
}

/** Options of a subscription (shared by `sowAndSubscribe`, `subscribe` and `replaceSubscription`). */
export interface SubscriptionFlags {
  /** Send an oof when a received record leaves the result set (O-1). */
  oof?: boolean;
  /** Send the key fields and changed fields only (D-2); a {@link Mirror} with `delta: true` merges them. */
  delta?: boolean;
  /** With `delta`: suppress deliveries in which no data field changed. */
  noEmpties?: boolean;
  /** With `delta`: always include the key fields (default true, as the Python SDK). */
  sendKeys?: boolean;
}

/** Conflation (C-1), for `sowAndSubscribe`. */
export interface ConflationOptions {
  /** At most one delivery per key per this many milliseconds, the latest state. */
  conflationMs?: number;
  /** The conflation key paths (default: the SowKey). */
  conflationKey?: string[];
}

export interface SowOptions extends QueryOptions, CallOptions {}

export interface SowAndSubscribeOptions extends QueryOptions, SubscriptionFlags, ConflationOptions, CallOptions {
  /** A client-chosen subscription id; the server chooses one when empty. */
  subId?: string;
}

export interface SubscribeOptions extends SubscriptionFlags, CallOptions {
  /** A filter expression; empty matches every message. */
  filter?: string;
  /** Replay the journal after this point first, then `completed`, then live (H-4). */
  bookmark?: BookmarkInput;
  /** A client-chosen subscription id. */
  subId?: string;
}

export interface ReplaceOptions extends SubscriptionFlags, CallOptions {
  /** The new filter. */
  filter?: string;
  /** The page, given again for paginated subscriptions. */
  orderBy?: string;
  topN?: number;
  skipN?: number;
  /** Records per response of the re-run query; default 10. */
  batchSize?: number;
}

export interface PublishOptions extends CallOptions {
  /** Merge each message into the existing record instead of replacing it (D-1). */
  delta?: boolean;
  /** Messages per request (one atomic batch); default 100. */
  batchSize?: number;
  /**
   * J-4: this publisher's producer id. Each request carries it with a rising sequence number,
   * so a request sent twice is applied once. A client given a list of servers uses generated
   * ids when this is not given (a retry after a failover is then applied once); publishes
   * naming the same id run one after the other.
   */
  producerId?: string;
}

export interface SowDeleteOptions extends CallOptions {
  /** Delete every record that matches this filter. */
  filter?: string;
  /** Delete these records (an empty array is refused: it names none). */
  sowKeys?: string[];
  /** Delete the record with the same SowKey as this document. */
  data?: JsonInput;
}

/**
 * A JSON document as the SDK takes it: an object or array (sent as `JSON.stringify` gives it),
 * JSON text, or UTF-8 JSON bytes.
 */
export type JsonInput = string | Uint8Array | object;

/**
 * A message to publish that needs more than its data: a SowKey (topics whose publishers supply
 * keys) or its own time to live.
 *
 * ```ts
 * await client.publish("notes", [new Message({ text: "hi" }, { sowKey: "n1", expirationMs: 60_000 })]);
 * ```
 */
export class Message {
  readonly sowKey: string;
  readonly expirationMs: number | undefined;
  constructor(
    readonly data: JsonInput,
    opts: { sowKey?: string; expirationMs?: number } = {},
  ) {
    this.sowKey = opts.sowKey ?? "";
    this.expirationMs = opts.expirationMs;
  }
}

/** Anything `publish` takes: a document (object, JSON text, bytes) or a {@link Message}. */
export type PublishItem = JsonInput | Message;

/** The outcome of a `publish` call. */
export interface PublishAck {
  /** Messages stored. */
  count: number;
  /** Bookmark of the first message stored (0n when none). */
  firstBookmark: bigint;
  /** Bookmark of the last message stored (0n when none). */
  lastBookmark: bigint;
}

/** The outcome of a `sowDelete`. */
export interface SowDeleteResult {
  /** How many records were deleted. */
  deletedCount: number;
  /** The bookmark of the last delete (0n when nothing was deleted). */
  bookmark: bigint;
}

/** One configured topic, as `listTopics` returns it. */
/** What {@link SowdbClient.stats} asks for. */
export interface StatsOptions extends CallOptions {
  /** A topic name or a regex over topic names (default: every topic). */
  topic?: string;
  /** Only the topics' figures and the caller's own subscriptions (a user without an admin role). */
  topicsOnly?: boolean;
}

export interface TopicInfo {
  name: string;
  kind: "sow" | "view" | "conflated" | "unspecified";
  /** Key paths; empty for publisher-provided SowKeys. */
  key: string[];
  durability: "persistent" | "transient" | "unspecified";
  /** History settings, when history is on. */
  history: { windowMs: number; granularityMs: number } | undefined;
  recordCount: number;
  indexes: string[];
  /** For views and conflated topics: the topic they derive from. */
  underlying: string;
  /** Default time to live of its records in ms; 0 = never. */
  expirationMs: number;
}

// ---------------------------------------------------------------------------------------------
// Request builders

export function encodeJson(data: JsonInput): Uint8Array {
  if (data instanceof Uint8Array) return data;
  return Buffer.from(typeof data === "string" ? data : JSON.stringify(data), "utf8");
}

export function publishMessage(item: PublishItem): PublishMessage {
  if (item instanceof Message) {
    return create(PublishMessageSchema, {
      data: encodeJson(item.data),
      sowKey: item.sowKey,
      expiration: item.expirationMs === undefined ? undefined : durationFromMs(item.expirationMs),
    });
  }
  return create(PublishMessageSchema, { data: encodeJson(item) });
}

function optionalCount(name: string, n: number | undefined): number | undefined {
  if (n === undefined) return undefined;
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new RangeError(`${name} must be a uint32: ${n}`);
  return n;
}

/**
 * `sowKeys` as given, refused when it names no key: one rule for a query and a delete (the
 * protocol cannot tell an empty list from none, so a query would take every record where a
 * delete is refused; a caller that built an empty list meant neither).
 */
export function sowKeysOf(keys: string[] | undefined): string[] {
  if (keys === undefined) return [];
  if (!Array.isArray(keys)) throw new TypeError("sowKeys takes an array of SowKeys");
  if (keys.length === 0) throw new RangeError("sowKeys is empty: it names no record; leave it out to take every record");
  return keys;
}

export function sowRequest(topic: string, o: QueryOptions): SowRequest {
  return create(SowRequestSchema, {
    topic,
    filter: o.filter ?? "",
    sowKeys: sowKeysOf(o.sowKeys),
    queryId: o.queryId ?? "",
    orderBy: o.orderBy ?? "",
    topN: optionalCount("topN", o.topN),
    skipN: optionalCount("skipN", o.skipN),
    batchSize: optionalCount("batchSize", o.batchSize ?? DEFAULT_BATCH_SIZE),
    bookmark: bookmarkText(o.bookmark),
    grouping: o.grouping ?? [],
    projection: o.projection ?? [],
    select: o.select ?? "",
  });
}

export function subscriptionOptions(o: SubscriptionFlags & ConflationOptions): PbSubscriptionOptions {
  return create(SubscriptionOptionsSchema, {
    oof: o.oof ?? false,
    delta: o.delta ?? false,
    noEmpties: o.noEmpties ?? false,
    sendKeys: o.sendKeys ?? true,
    conflation: o.conflationMs ? durationFromMs(o.conflationMs) : undefined,
    conflationKey: o.conflationKey ?? [],
  });
}

export function sowAndSubscribeRequest(topic: string, o: SowAndSubscribeOptions): SowAndSubscribeRequest {
  return create(SowAndSubscribeRequestSchema, {
    query: sowRequest(topic, o),
    options: subscriptionOptions(o),
    subId: o.subId ?? "",
  });
}

export function subscribeRequest(topic: string, o: SubscribeOptions): SubscribeRequest {
  return create(SubscribeRequestSchema, {
    topic,
    filter: o.filter ?? "",
    bookmark: bookmarkText(o.bookmark),
    options: subscriptionOptions(o),
    subId: o.subId ?? "",
  });
}

export function replaceRequest(subId: string, o: ReplaceOptions): ReplaceSubscriptionRequest {
  return create(ReplaceSubscriptionRequestSchema, {
    subId,
    filter: o.filter ?? "",
    options: subscriptionOptions(o),
    orderBy: o.orderBy ?? "",
    topN: optionalCount("topN", o.topN),
    skipN: optionalCount("skipN", o.skipN),
    batchSize: optionalCount("batchSize", o.batchSize ?? DEFAULT_BATCH_SIZE),
  });
}
