/**
 * The order of a page's rows, as the server keeps it (P-1): `order_by` (`/a DESC, /b`), then
 * the SowKey; the SowKey alone without one. A live page's events say which records entered or
 * left the window, not where they stand in it, so the page sorts what it holds the same way.
 *
 * Values rank as the server's `order_key` ranks them: missing, null, empty strings and objects
 * first; then numbers (booleans as 0 and 1); then non-empty strings; an array stands for its
 * first element.
 */
import type { SowRecord } from "../src/types.ts";

interface Part {
  steps: string[];
  descending: boolean;
}

/** The parts of an `order_by` text; null when it is not one the page can follow (the server
 * refuses it anyway, naming the position). */
export function parseOrderBy(text: string): Part[] | null {
  if (!text.trim()) return [];
  const parts: Part[] = [];
  for (const item of text.split(",")) {
    const m = /^\s*(\/\S*)\s*(ASC|DESC)?\s*$/i.exec(item);
    if (!m) return null;
    parts.push({ steps: m[1]!.split("/").slice(1), descending: (m[2] ?? "").toUpperCase() === "DESC" });
  }
  return parts;
}

function at(data: unknown, steps: string[]): unknown {
  let v = data;
  for (const s of steps) {
    if (Array.isArray(v) && /^\d+$/.test(s)) v = v[Number(s)];
    else if (typeof v === "object" && v !== null && !Array.isArray(v)) v = (v as Record<string, unknown>)[s];
    else return undefined;
  }
  return v;
}

function rank(value: unknown): [number, number | string] {
  const v = Array.isArray(value) ? value[0] : value;
  if (typeof v === "boolean") return [2, v ? 1 : 0];
  if (typeof v === "number") return Number.isNaN(v) ? [1, 0] : [2, v];
  if (typeof v === "string" && v) return [3, v];
  return [0, 0];
}

function compareValues(a: unknown, b: unknown): number {
  const [ra, va] = rank(a);
  const [rb, vb] = rank(b);
  if (ra !== rb) return ra - rb;
  return va < vb ? -1 : va > vb ? 1 : 0;
}

/** A comparator of records in the page's order. */
export function comparator(parts: Part[]): (a: SowRecord, b: SowRecord) => number {
  return (a, b) => {
    for (const p of parts) {
      const c = compareValues(at(a.data, p.steps), at(b.data, p.steps));
      if (c !== 0) return p.descending ? -c : c;
    }
    return a.sowKey < b.sowKey ? -1 : a.sowKey > b.sowKey ? 1 : 0;
  };
}
