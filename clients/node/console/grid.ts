/**
 * The live grid: one page of a topic as a paginated sow_and_subscribe (P-1), kept current.
 *
 * The server sends the window's records, then a `publish` for each record that enters the
 * window or changes in it and an `oof` for each one pushed or removed out of it; the SDK's
 * {@link Mirror} applies them, and the rows are drawn in the window's order ({@link comparator})
 * at most once per animation frame. Each live record's arrival and the moment its frame was
 * drawn are kept in `window.sowdbConsole.arrivals`, which the latency benchmark reads.
 */
import { toSowdbError, type SowdbError } from "../src/errors.ts";
import { type SowEvent, Mirror, eventFromPb } from "../src/events.ts";
import type { SowRecord } from "../src/types.ts";
import { el, show } from "./dom.ts";
import { comparator, parseOrderBy } from "./order.ts";
import { authHeaders, sow } from "./rpc.ts";

/** What the grid's form asks for. */
export interface GridSettings {
  topic: string;
  filter: string;
  orderBy: string;
  pageSize: number;
  page: number;
}

/** One live record: when it came off the stream and when the frame showing it was drawn
 * (milliseconds since the epoch, sub-millisecond precision). */
export interface Arrival {
  sowKey: string;
  bookmark: string;
  data: unknown;
  receivedAt: number;
  shownAt: number;
}

declare global {
  interface Window {
    sowdbConsole: { arrivals: Arrival[] };
  }
}

const MAX_ARRIVALS = 100_000;
const RETRY_MS = 2000;

/** Codes that say the connection or the server went, not that the query was refused: the
 * grid subscribes again after {@link RETRY_MS} (a server restarting, a network blip). */
const RETRIED = new Set(["UNAVAILABLE", "CANCELLED", "UNKNOWN", "INTERNAL", "DEADLINE_EXCEEDED"]);

function now(): number {
  return performance.timeOrigin + performance.now();
}

function cell(value: unknown): string {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

export class Grid {
  private abort: AbortController | undefined;
  private mirror = new Mirror();
  private compare = comparator([]);
  private offset = 0;
  private columns: string[] = [];
  private readonly rows = new Map<string, { tr: HTMLTableRowElement; record: SowRecord }>();
  private pending: Omit<Arrival, "shownAt">[] = [];
  private frame = 0;
  private loaded = false;
  private drawn = false;
  private matched = 0;
  private bookmark = 0n;

  constructor() {
    window.sowdbConsole = { arrivals: [] };
  }

  /** Ends the current subscription, if any, and places a new one. */
  subscribe(s: GridSettings): void {
    this.stop();
    const abort = new AbortController();
    this.abort = abort;
    this.mirror = new Mirror();
    this.compare = comparator(parseOrderBy(s.orderBy) ?? []);
    this.offset = (s.page - 1) * s.pageSize;
    this.columns = [];
    this.loaded = false;
    this.drawn = false;
    this.matched = 0;
    this.bookmark = 0n;
    this.rows.clear();
    document.querySelector("#grid thead")!.replaceChildren();
    document.querySelector("#grid tbody")!.replaceChildren();
    this.showError(undefined);
    this.status("subscribing", `subscribing to ${s.topic}…`);
    void this.run(s, abort.signal);
  }

  stop(): void {
    this.abort?.abort();
    this.abort = undefined;
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.pending = [];
  }

  private async run(s: GridSettings, signal: AbortSignal): Promise<void> {
    const request = {
      query: { topic: s.topic, filter: s.filter, orderBy: s.orderBy, topN: s.pageSize, skipN: this.offset, batchSize: 1000 },
      options: { oof: true },
    };
    try {
      for await (const response of sow.sowAndSubscribe(request, { signal, headers: authHeaders() })) {
        const event = eventFromPb(response);
        if (event !== undefined) this.apply(event);
      }
      if (!signal.aborted) this.status("ended", "the server ended the subscription (it is stopping?)");
    } catch (err) {
      if (signal.aborted) return;
      const e = toSowdbError(err);
      const retry = RETRIED.has(e.code);
      this.showError(e, s, retry);
      if (retry) {
        window.setTimeout(() => {
          if (!signal.aborted) this.subscribe(s);
        }, RETRY_MS);
      }
    }
  }

  private apply(event: SowEvent): void {
    this.mirror.apply(event);
    switch (event.kind) {
      case "group_end":
        this.loaded = true;
        this.matched = event.recordsMatched;
        break;
      case "publish": {
        const at = now();
        for (const r of event.records) {
          this.pending.push({ sowKey: r.sowKey, bookmark: String(r.bookmark), data: r.data, receivedAt: at });
        }
        break;
      }
      case "heartbeat":
      case "group_begin":
      case "subscribed":
        if (event.bookmark > this.bookmark) this.bookmark = event.bookmark;
        break;
      default:
        break;
    }
    if (this.mirror.bookmark > this.bookmark) this.bookmark = this.mirror.bookmark;
    if (this.loaded && this.frame === 0) this.frame = requestAnimationFrame(() => this.render());
  }

  private render(): void {
    this.frame = 0;
    const records = [...this.mirror.records()].sort(this.compare);
    const redraw = this.addColumns(records);
    const body = document.querySelector("#grid tbody")!;
    const present = new Set(records.map((r) => r.sowKey));
    for (const [key, row] of this.rows) {
      if (!present.has(key)) {
        row.tr.remove();
        this.rows.delete(key);
      }
    }
    let cursor = body.firstElementChild;
    records.forEach((record, i) => {
      let row = this.rows.get(record.sowKey);
      const fresh = row === undefined || row.record !== record;
      if (fresh || redraw) {
        const tr = this.row(record);
        if (fresh && this.drawn) tr.classList.add("changed");
        if (row !== undefined) {
          if (cursor === row.tr) cursor = cursor.nextElementSibling;
          row.tr.remove();
        }
        row = { tr, record };
        this.rows.set(record.sowKey, row);
      }
      row!.tr.firstElementChild!.textContent = String(this.offset + i + 1);
      if (row!.tr === cursor) cursor = cursor.nextElementSibling;
      else body.insertBefore(row!.tr, cursor);
    });
    this.drawn = true;
    const first = records.length ? this.offset + 1 : 0;
    const range = records.length ? `rows ${first}–${this.offset + records.length}` : "no rows on this page";
    this.status("live", `live · ${range} · ${this.matched.toLocaleString("en-US")} matched when subscribed · bookmark ${this.bookmark}`);
    const shownAt = now();
    const arrivals = window.sowdbConsole.arrivals;
    for (const a of this.pending) arrivals.push({ ...a, shownAt });
    if (arrivals.length > MAX_ARRIVALS) arrivals.splice(0, arrivals.length - MAX_ARRIVALS);
    this.pending = [];
  }

  /** Columns: the top-level fields of the rows, in the order first seen; true when new ones
   * came (every row is then drawn anew). */
  private addColumns(records: SowRecord[]): boolean {
    const known = new Set(this.columns);
    const before = this.columns.length;
    for (const r of records) {
      if (typeof r.data !== "object" || r.data === null || Array.isArray(r.data)) continue;
      for (const k of Object.keys(r.data)) {
        if (!known.has(k)) {
          known.add(k);
          this.columns.push(k);
        }
      }
    }
    if (this.columns.length === before && before > 0) return false;
    const head = el("tr");
    head.append(el("th", { class: "num" }, "#"), ...this.columns.map((c) => el("th", {}, `/${c}`)));
    document.querySelector("#grid thead")!.replaceChildren(head);
    return this.columns.length !== before;
  }

  private row(record: SowRecord): HTMLTableRowElement {
    const tr = el("tr", { "data-sow-key": record.sowKey });
    tr.append(el("td", { class: "num" }));
    const data = typeof record.data === "object" && record.data !== null ? (record.data as Record<string, unknown>) : {};
    for (const c of this.columns) {
      const v = data[c];
      tr.append(el("td", { "data-field": c, ...(typeof v === "number" ? { class: "num" } : {}) }, cell(v)));
    }
    return tr;
  }

  private status(state: string, text: string): void {
    const e = document.getElementById("grid-status")!;
    e.dataset["state"] = state;
    e.textContent = text;
  }

  /** A refusal beside the box it is about: a filter error under the filter, with a caret at
   * its column; anything else (order_by, topic, rights) under the form. */
  private showError(e: SowdbError | undefined, s?: GridSettings, retrying = false): void {
    const filterBox = document.getElementById("filter-error")!;
    const other = document.getElementById("grid-error")!;
    show(filterBox, false);
    show(other, false);
    if (e === undefined || s === undefined) return;
    this.status("error", retrying ? `disconnected (${e.code}): subscribing again in ${RETRY_MS / 1000} s` : `refused: ${e.code}`);
    const onFilter = e.field === "filter";
    const box = onFilter ? filterBox : other;
    const text = onFilter ? s.filter : e.field === "order_by" ? s.orderBy : "";
    const lines = [`${e.code}: ${e.message}`];
    if (text && e.column !== undefined) lines.push(text, `${" ".repeat(Math.max(0, e.column - 1))}^`);
    box.textContent = lines.join("\n");
    show(box, true);
  }
}
