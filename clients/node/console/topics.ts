/**
 * The topics page: every topic the caller may read (ListTopics, A-3) with its definition and
 * its figures since the server started (Stats with `topics_only`, which any caller may ask for
 * the topics it may read), asked for again every {@link REFRESH_MS} while the page is shown;
 * on a node of a cluster, above them, each node's role and lag (./cluster.ts).
 */
import type { Duration } from "@bufbuild/protobuf/wkt";
import { toSowdbError } from "../src/errors.ts";
import { Durability, type TopicInfo, TopicKind } from "../src/gen/sowdb/v1/sow_pb.ts";
import type { TopicStats } from "../src/gen/sowdb/v1/admin_pb.ts";
import { durationMs } from "../src/types.ts";
import { showCluster } from "./cluster.ts";
import { el, gridLink, show } from "./dom.ts";
import { admin, authHeaders, sow } from "./rpc.ts";

export const REFRESH_MS = 1500;

const KINDS: Record<number, string> = {
  [TopicKind.SOW]: "sow",
  [TopicKind.VIEW]: "view",
  [TopicKind.CONFLATED]: "conflated",
};

const DURABILITIES: Record<number, string> = {
  [Durability.PERSISTENT]: "persistent",
  [Durability.TRANSIENT]: "transient",
};

/** A duration as the config writes it (`1d`, `5s`, `250ms`); "" for none. */
function duration(d: Duration | undefined): string {
  const ms = durationMs(d);
  if (!ms) return "";
  for (const [unit, size] of [["d", 86_400_000], ["h", 3_600_000], ["m", 60_000], ["s", 1000]] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** The key paths; for a topic without any, where its SowKeys come from (as `sow topics` says). */
function keyText(t: TopicInfo): string {
  if (t.key.length > 0) return t.key.join(", ");
  if (t.kind === TopicKind.VIEW) return "(group values)";
  if (t.kind === TopicKind.CONFLATED) return `(as ${t.underlying})`;
  return "(set by publisher)";
}

function figure(field: string, value: bigint | undefined): HTMLTableCellElement {
  return el("td", { class: "num", "data-field": field }, value === undefined ? "" : value.toLocaleString("en-US"));
}

function row(t: TopicInfo, s: TopicStats | undefined): HTMLTableRowElement {
  const tr = el("tr", { "data-topic": t.name });
  const name = el("td");
  name.append(gridLink(t.name));
  const count = el("td", { class: "num", "data-field": "records" }, t.recordCount.toLocaleString("en-US"));
  const granularity = duration(t.history?.granularity);
  const history = t.history ? `${duration(t.history.window)}${granularity ? ` every ${granularity}` : ""}` : "";
  tr.append(
    name,
    el("td", {}, KINDS[t.kind] ?? ""),
    count,
    el("td", { "data-field": "key" }, keyText(t)),
    el("td", {}, DURABILITIES[t.durability] ?? ""),
    el("td", {}, history),
    el("td", {}, duration(t.expiration)),
    el("td", {}, t.indexes.join(", ")),
    el("td", {}, t.underlying),
    figure("publishes", s?.publishes),
    figure("deletes", s?.deletes),
    figure("subscriptions", s?.subscriptions),
    figure("bytes", s?.bytesStored),
  );
  return tr;
}

/** Keeps the topics table current while `active()` is true; returns the names it last saw
 * to `onNames` (the grid's topic box offers them). */
export class TopicsPage {
  private timer: number | undefined;
  private running = false;

  constructor(private readonly onNames: (names: string[]) => void) {}

  start(): void {
    if (this.running) return;
    this.running = true;
    void this.refresh();
  }

  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
  }

  /** Asks now (the token changed), then every REFRESH_MS. */
  async refresh(): Promise<void> {
    clearTimeout(this.timer);
    const error = document.getElementById("topics-error")!;
    try {
      const options = { headers: authHeaders(), timeoutMs: 10_000 };
      // the figures are a bonus: a server without Stats still lists its topics
      const [res, stats] = await Promise.all([
        sow.listTopics({}, options),
        admin.stats({ topicsOnly: true }, options).catch(() => undefined),
      ]);
      const figures = new Map((stats?.topics ?? []).map((s) => [s.name, s]));
      showCluster(stats?.cluster ?? []);
      const body = document.querySelector("#topics tbody")!;
      body.replaceChildren(...res.topics.map((t) => row(t, figures.get(t.name))));
      this.onNames(res.topics.map((t) => t.name));
      document.getElementById("topics-updated")!.textContent = `updated ${new Date().toLocaleTimeString()}`;
      show(error, false);
    } catch (err) {
      const e = toSowdbError(err);
      error.textContent = `${e.code}: ${e.message}`;
      show(error, true);
    }
    if (this.running) this.timer = window.setTimeout(() => void this.refresh(), REFRESH_MS);
  }
}
