/**
 * What `sow`, `sowAndSubscribe` and `subscribe` return: a query's result and a live
 * subscription, each an async iterable over the stream the client opens for it.
 */
import type { SowResponse } from "./gen/sowdb/v1/sow_pb.js";
import { toSowdbError } from "./errors.js";
import type { SowEvent } from "./events.js";
import { type SowRecord, recordsFromPb } from "./types.js";

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
