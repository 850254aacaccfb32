/**
 * The servers of a client (SPEC §13, HA-5): one HTTP/2 connection per server, opened on first
 * use, and which of them is the primary.
 *
 * A client given one address has one node and never asks who is primary: it behaves exactly as
 * a client of a lone server. Given a list, writes go to the primary, found by asking every
 * server `AdminService.ClusterStatus` (each node answers with its own role and epoch first; a
 * primary lists its followers too), or from a replica's refusal, which names the primary's
 * address (`FAILED_PRECONDITION`, ErrorInfo metadata `primary`). A primary address that is not
 * in the list (the cluster advertises `10.0.0.1:9007`, the list said `db1:9007`) is added.
 */
import type * as http2 from "node:http2";
import { create } from "@bufbuild/protobuf";
import { type Client as ConnectClient, type Interceptor, createClient as createConnectClient } from "@connectrpc/connect";
import { Http2SessionManager, createGrpcTransport } from "@connectrpc/connect-node";
import { Health } from "./gen/grpc/health/v1/health_pb.js";
import { AdminService, type ClusterNode, ClusterStatusRequestSchema } from "./gen/sowdb/v1/admin_pb.js";
import { SowService } from "./gen/sowdb/v1/sow_pb.js";
import { baseUrlOf } from "./address.js";
import { SowdbError, toSowdbError } from "./errors.js";
import { isFailover } from "./failover.js";

/** How a client's connections are made: the same for every server of its list. */
export interface ChannelSettings {
  tls: boolean;
  nodeOptions: http2.SecureClientSessionOptions | undefined;
  interceptors: Interceptor[];
  maxMessageBytes: number;
  /** HTTP/2 PING interval (gRPC's `keepalive_time_ms`); 0: none. */
  keepaliveMs: number;
  /** How long a PING may go unanswered before the connection counts as dead (`keepalive_timeout_ms`). */
  keepaliveTimeoutMs: number;
}

/** One server: its address and the clients of its services over its one connection. */
export class Channel {
  readonly session: Http2SessionManager;
  readonly rpc: ConnectClient<typeof SowService>;
  readonly admin: ConnectClient<typeof AdminService>;
  readonly health: ConnectClient<typeof Health>;

  constructor(
    readonly address: string,
    s: ChannelSettings,
  ) {
    const baseUrl = baseUrlOf(address, s.tls);
    // keepalives (HA-5): a connection whose peer vanished without a FIN (a blackholed host, a
    // partition) is found dead within keepaliveMs + keepaliveTimeoutMs instead of hanging a
    // subscription forever; connect-node sends PINGs on connections with open streams
    const ping = s.keepaliveMs > 0 ? { pingIntervalMs: s.keepaliveMs, pingTimeoutMs: s.keepaliveTimeoutMs } : {};
    this.session = new Http2SessionManager(baseUrl, ping, s.nodeOptions);
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.session,
      interceptors: s.interceptors,
      readMaxBytes: s.maxMessageBytes,
      writeMaxBytes: s.maxMessageBytes,
    });
    this.rpc = createConnectClient(SowService, transport);
    this.admin = createConnectClient(AdminService, transport);
    this.health = createConnectClient(Health, transport);
  }

  /** Closes the connection with a GOAWAY NO_ERROR (calls still open were cancelled before). */
  close(): void {
    // connect-node's public Http2SessionManager.abort() ends the connection with GOAWAY CANCEL,
    // which gRPC servers log as an error; close the session it holds gracefully when it is
    // there (the calls are already cancelled, so nothing keeps it open).
    const conn = (this.session as unknown as { s?: { conn?: http2.ClientHttp2Session } }).s?.conn;
    if (conn !== undefined && !conn.destroyed && !conn.closed) conn.close();
    else this.session.abort();
  }

  /** This node's own row of `ClusterStatus`, and the others it knows; `[]` when it is up but
   * refuses to say (a user who is not an admin, a server that runs alone); undefined when it
   * does not answer within `timeoutMs` (down, unreachable). */
  async status(signal: AbortSignal, timeoutMs: number): Promise<ClusterNode[] | undefined> {
    try {
      const reply = await this.admin.clusterStatus(create(ClusterStatusRequestSchema), { signal, timeoutMs });
      return reply.nodes;
    } catch (err) {
      const e = toSowdbError(err);
      return isFailover(e) || e.code === "DEADLINE_EXCEEDED" || e.code === "CANCELLED" ? undefined : [];
    }
  }
}

/** How long one `ClusterStatus` question may take while looking for the primary. */
const STATUS_TIMEOUT_MS = 2000;
/** Pause between two rounds of questions while no node says it is primary (an election runs). */
const ROUND_PAUSE_MS = 100;

/** The servers of one client, and the primary as last found. */
export class Nodes {
  readonly channels: Channel[];
  private primary: Channel | undefined;
  private next = 0;

  constructor(
    addresses: string[],
    private readonly settings: ChannelSettings,
  ) {
    this.channels = addresses.map((a) => new Channel(a, settings));
    this.next = Math.floor(Math.random() * this.channels.length); // spread `readFrom: "any"`
  }

  /** More than one server: writes look for the primary, and failures are retried. */
  get cluster(): boolean {
    return this.channels.length > 1;
  }

  /** The channel of `address`, added when the list does not have it. */
  channel(address: string): Channel {
    const found = this.channels.find((c) => c.address === address);
    if (found !== undefined) return found;
    const added = new Channel(address, this.settings);
    this.channels.push(added);
    return added;
  }

  /** The nodes in the order `readFrom: "any"` tries them: a different first one each time. */
  rotation(): Channel[] {
    const n = this.channels.length;
    const start = this.next++ % n;
    return [...this.channels.slice(start), ...this.channels.slice(0, start)];
  }

  /** The primary last found, if any. */
  get known(): Channel | undefined {
    return this.primary;
  }

  /** What a failed write taught: `address` is the primary (a replica named it), or, with
   * none, the primary is unknown again (it is gone, or no longer primary). */
  learn(address: string | undefined): void {
    this.primary = address ? this.channel(address) : undefined;
  }

  /**
   * The primary: the one last found, else the node that `ClusterStatus` says leads at the
   * highest epoch, asking every server at once, round after round until `deadline`
   * (`Date.now()` milliseconds). A write (`probe`) may also go to a node that answered without
   * being primary: a replica refuses it naming the primary (a list of replicas alone finds it
   * so), or answers `UNAVAILABLE` while it knows none; a read waits for a primary.
   *
   * @throws SowdbError `UNAVAILABLE` no server said it was primary before the deadline.
   */
  async findPrimary(signal: AbortSignal, deadline: number, probe = false): Promise<Channel> {
    if (this.primary !== undefined) return this.primary;
    if (!this.cluster) return this.channels[0]!;
    for (;;) {
      const left = deadline - Date.now();
      const answers = await Promise.all(
        this.channels.map((c) => c.status(signal, Math.max(1, Math.min(STATUS_TIMEOUT_MS, left)))),
      );
      let best: ClusterNode | undefined;
      for (const rows of answers) {
        const own = rows?.[0];
        if (own?.role === "primary" && (best === undefined || own.epoch > best.epoch)) best = own;
      }
      if (best !== undefined && best.address !== "") {
        this.primary = this.channel(best.address);
        return this.primary;
      }
      const answered = answers.findIndex((rows) => rows !== undefined);
      if (probe && answered >= 0) return this.channels[answered]!;
      if (signal.aborted) throw signal.reason;
      if (Date.now() + ROUND_PAUSE_MS >= deadline) {
        throw new SowdbError({
          code: "UNAVAILABLE",
          message: `no primary among ${this.channels.map((c) => c.address).join(", ")}: none said it was the primary`,
        });
      }
      await pause(ROUND_PAUSE_MS, signal);
    }
  }

  /**
   * A node that has applied `bookmark` (its own `ClusterStatus` row says so): the primary when
   * `primaryOnly`, else any, trying them in {@link rotation} order, round after round until
   * `deadline`. A node that is up but does not say (`ClusterStatus` takes an admin when
   * security is on) is taken when no node says it has applied the bookmark: the caller checks
   * it by what the node answers (see resume.ts). Undefined when none is found by then.
   */
  async holding(
    bookmark: bigint,
    primaryOnly: boolean,
    signal: AbortSignal,
    deadline: number,
  ): Promise<Channel | undefined> {
    for (;;) {
      let unsaid: Channel | undefined;
      for (const c of this.rotation()) {
        const rows = await c.status(signal, Math.max(1, Math.min(STATUS_TIMEOUT_MS, deadline - Date.now())));
        const own = rows?.[0];
        if (rows !== undefined && own === undefined) unsaid ??= c;
        if (own === undefined || (primaryOnly && own.role !== "primary")) continue;
        if (own.appliedBookmark >= bookmark) {
          if (own.role === "primary") this.primary = c;
          return c;
        }
      }
      if (unsaid !== undefined) return unsaid;
      if (signal.aborted || Date.now() + ROUND_PAUSE_MS >= deadline) return undefined;
      await pause(ROUND_PAUSE_MS, signal);
    }
  }

  close(): void {
    for (const c of this.channels) c.close();
  }
}

/** Waits `ms` (or until `signal` aborts). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}

/** An AbortController that also aborts when `parent` does. Leaving a `for await` loop over a
 * Connect stream does not cancel its call: a stream the SDK gives up on early is opened with
 * one of these, aborted when it is left. */
export function linked(parent: AbortSignal | undefined): AbortController {
  const c = new AbortController();
  if (parent === undefined) return c;
  if (parent.aborted) c.abort(parent.reason);
  else parent.addEventListener("abort", () => c.abort(parent.reason), { once: true, signal: c.signal });
  return c;
}
