/**
 * Typed events of subscription streams, and a {@link Mirror} that applies them.
 *
 * `SowEvent` is a discriminated union on `kind`: a `switch (event.kind)` narrows each case to
 * its own fields.
 */
import type { SowAndSubscribeResponse, SubscribeResponse } from "./gen/sowdb/v1/sow_pb.js";
import { OofReason as PbOofReason } from "./gen/sowdb/v1/sow_pb.js";
import { type SowRecord, recordFromPb, recordsFromPb, SowRecord as Rec } from "./types.js";

/** The subscription is placed: its id (for `replaceSubscription`) and sequence point. */
export interface SubscribedEvent {
  kind: "subscribed";
  subId: string;
  bookmark: bigint;
}

/** Opens the query results; `bookmark` is the point the query sees. */
export interface GroupBeginEvent {
  kind: "group_begin";
  queryId: string;
  bookmark: bigint;
}

/** A batch of query results. */
export interface SowBatchEvent<T = any> {
  kind: "sow";
  records: SowRecord<T>[];
}

/** Closes the query results, with the counts. */
export interface GroupEndEvent {
  kind: "group_end";
  queryId: string;
  recordsReturned: number;
  recordsMatched: number;
  recordsScanned: number;
}

/** Live (or replayed) records. */
export interface PublishEvent<T = any> {
  kind: "publish";
  records: SowRecord<T>[];
}

/** Why a record left the result set (O-1). */
export type OofReason = "deleted" | "expired" | "match" | "unspecified";

/**
 * A record left the result set (O-1). `record` is, for `match`, the update that moved it out,
 * otherwise its last stored state; `records` is `[record]`, for code that treats every
 * record-carrying event alike.
 */
export interface OofEvent<T = any> {
  kind: "oof";
  reason: OofReason;
  record: SowRecord<T>;
  records: SowRecord<T>[];
}

/** Records deleted (plain `subscribe` without `oof`). */
export interface DeletedEvent<T = any> {
  kind: "deleted";
  records: SowRecord<T>[];
}

/** The replay of a bookmark subscription is done; live events follow (H-3, H-4). */
export interface CompletedEvent {
  kind: "completed";
  bookmark: bigint;
}

/** Idle progress: the latest bookmark of the instance. */
export interface HeartbeatEvent {
  kind: "heartbeat";
  bookmark: bigint;
}

/** One event of a `sowAndSubscribe` or `subscribe` stream. */
export type SowEvent<T = any> =
  | SubscribedEvent
  | GroupBeginEvent
  | SowBatchEvent<T>
  | GroupEndEvent
  | PublishEvent<T>
  | OofEvent<T>
  | DeletedEvent<T>
  | CompletedEvent
  | HeartbeatEvent;

/** Every event kind, in the order a `sowAndSubscribe` stream may send them. */
export type EventKind = SowEvent["kind"];

const REASONS: Record<number, OofReason> = {
  [PbOofReason.DELETED]: "deleted",
  [PbOofReason.EXPIRED]: "expired",
  [PbOofReason.MATCH]: "match",
};

/** The SDK event for a stream response (undefined for an event kind this SDK does not know). */
export function eventFromPb<T>(resp: SowAndSubscribeResponse | SubscribeResponse): SowEvent<T> | undefined {
  const e = resp.event;
  switch (e.case) {
    case "publish":
      return { kind: "publish", records: recordsFromPb<T>(e.value.records) };
    case "records":
      return { kind: "sow", records: recordsFromPb<T>(e.value.records) };
    case "oof": {
      const record = recordFromPb<T>(e.value.record ?? emptyRecord());
      return { kind: "oof", reason: REASONS[e.value.reason] ?? "unspecified", record, records: [record] };
    }
    case "deleted":
      return { kind: "deleted", records: recordsFromPb<T>(e.value.records) };
    case "subscribed":
      return { kind: "subscribed", subId: e.value.subId, bookmark: e.value.bookmark };
    case "groupBegin":
      return { kind: "group_begin", queryId: e.value.queryId, bookmark: e.value.bookmark };
    case "groupEnd":
      return {
        kind: "group_end",
        queryId: e.value.queryId,
        recordsReturned: Number(e.value.recordsReturned),
        recordsMatched: Number(e.value.recordsMatched),
        recordsScanned: Number(e.value.recordsScanned),
      };
    case "completed":
      return { kind: "completed", bookmark: e.value.bookmark };
    case "heartbeat":
      return { kind: "heartbeat", bookmark: e.value.bookmark };
    default:
      return undefined;
  }
}

function emptyRecord() {
  return {
    $typeName: "sowdb.v1.Record" as const,
    topic: "",
    sowKey: "",
    bookmark: 0n,
    timestamp: undefined,
    data: new Uint8Array(),
  };
}

/**
 * A local copy of a subscription's result set, keyed by (topic, SowKey) and kept exact by
 * applying every event of a `sowAndSubscribe` (query results, live publishes, oof and deletes;
 * with `delta: true`, delta publishes are merged into the record held, D-1).
 *
 * ```ts
 * const mirror = new Mirror();
 * for await (const event of client.sowAndSubscribe("orders", { filter: "/symbol = 'SYM1'", oof: true })) {
 *   mirror.apply(event);
 *   if (mirror.ready) render(mirror.values());
 * }
 * ```
 */
export class Mirror<T = any> {
  /** True once the query's `group_end` has been applied: the mirror holds the whole result. */
  ready = false;
  /** The highest bookmark of any record applied (0n before any). */
  bookmark = 0n;
  private readonly byTopic = new Map<string, Map<string, SowRecord<T>>>();
  private readonly delta: boolean;
  private count = 0;

  constructor(opts: { delta?: boolean } = {}) {
    this.delta = opts.delta ?? false;
  }

  /** Applies one event; events without records only move `ready`. */
  apply(event: SowEvent<T>): void {
    switch (event.kind) {
      case "sow":
        this.put(event.records, false);
        break;
      case "publish":
        this.put(event.records, this.delta);
        break;
      case "oof":
      case "deleted":
        for (const r of event.records) this.remove(r.topic, r.sowKey);
        this.track(event.records);
        break;
      case "group_end":
        this.ready = true;
        break;
      default:
        break;
    }
  }

  /** Applies every event of a stream (until it ends). */
  async applyAll(events: AsyncIterable<SowEvent<T>>): Promise<void> {
    for await (const e of events) this.apply(e);
  }

  /** The record held for (topic, sowKey). */
  get(topic: string, sowKey: string): SowRecord<T> | undefined {
    return this.byTopic.get(topic)?.get(sowKey);
  }

  has(topic: string, sowKey: string): boolean {
    return this.byTopic.get(topic)?.has(sowKey) ?? false;
  }

  /** How many records are held, over every topic. */
  get size(): number {
    return this.count;
  }

  /** The records held for one topic, by SowKey. */
  topic(name: string): ReadonlyMap<string, SowRecord<T>> {
    return this.byTopic.get(name) ?? new Map<string, SowRecord<T>>();
  }

  /** Every record held. */
  *records(): IterableIterator<SowRecord<T>> {
    for (const m of this.byTopic.values()) yield* m.values();
  }

  [Symbol.iterator](): IterableIterator<SowRecord<T>> {
    return this.records();
  }

  /** The documents held. */
  values(): T[] {
    return Array.from(this.records(), (r) => r.data);
  }

  /** Forgets everything (e.g. before applying a new stream). */
  clear(): void {
    this.byTopic.clear();
    this.count = 0;
    this.ready = false;
    this.bookmark = 0n;
  }

  private put(records: SowRecord<T>[], merge: boolean): void {
    for (let r of records) {
      let m = this.byTopic.get(r.topic);
      if (m === undefined) {
        m = new Map();
        this.byTopic.set(r.topic, m);
      }
      const held = m.get(r.sowKey);
      if (held === undefined) this.count++;
      else if (merge) r = new Rec<T>(r.topic, r.sowKey, r.bookmark, r.timestampUs, mergeDelta(held.data, r.data) as T);
      m.set(r.sowKey, r);
    }
    this.track(records);
  }

  private remove(topic: string, sowKey: string): void {
    const m = this.byTopic.get(topic);
    if (m?.delete(sowKey)) {
      this.count--;
      if (m.size === 0) this.byTopic.delete(topic);
    }
  }

  private track(records: SowRecord<T>[]): void {
    for (const r of records) if (r.bookmark > this.bookmark) this.bookmark = r.bookmark;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** D-1 merge, on copies: named fields overwritten, nested objects merged, arrays replaced. */
export function mergeDelta(into: unknown, delta: unknown): unknown {
  if (!isObject(into) || !isObject(delta)) return delta;
  const out: Record<string, unknown> = { ...into };
  for (const [k, v] of Object.entries(delta)) out[k] = isObject(v) && isObject(out[k]) ? mergeDelta(out[k], v) : v;
  return out;
}
