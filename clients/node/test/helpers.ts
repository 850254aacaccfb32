/** Small helpers shared by the tests. */
import type { SowEvent } from "@sowdb/client";

/** The next value of an async iterator, failing after `ms`. */
export async function nextWithin<T>(it: AsyncIterator<T>, ms = 10_000): Promise<IteratorResult<T>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no event within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([it.next(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Events of a subscription up to and including the first for which `stop` is true (heartbeats skipped). */
export async function eventsUntil<T>(
  it: AsyncIterator<SowEvent<T>>,
  stop: (e: SowEvent<T>) => boolean,
  ms = 10_000,
): Promise<SowEvent<T>[]> {
  const out: SowEvent<T>[] = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await nextWithin(it, Math.max(1, deadline - Date.now()));
    if (r.done) throw new Error(`the stream ended before the expected event; got ${kinds(out)}`);
    if (r.value.kind === "heartbeat") continue;
    out.push(r.value);
    if (stop(r.value)) return out;
  }
}

/** The kinds of some events, for messages. */
export function kinds(events: SowEvent[]): string {
  return events.map((e) => e.kind).join(",");
}

/** Waits until `cond()` holds (polling), failing after `ms`. */
export async function until(cond: () => boolean | Promise<boolean>, ms = 10_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
