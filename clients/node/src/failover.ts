/**
 * Failover of calls (SPEC §13, HA-5): which failures mean "the node is gone, or is not the
 * primary (any more)", and the loop that retries a write on the primary found again, until the
 * client's `failoverTimeout`.
 */
import { SowdbError, toSowdbError } from "./errors.js";
import { type Channel, type Nodes, pause } from "./nodes.js";

/** What the client's options say about failover. */
export interface FailoverSettings {
  /** How long a call keeps looking for a node that serves it (milliseconds). */
  timeoutMs: number;
  /** `"primary"`: reads go to the primary; `"any"`: to any node. */
  readFrom: "primary" | "any";
}

/** The ErrorInfo reason of a write refused by a replica (the server's `NotPrimary`). */
export const NOT_PRIMARY = "NOT_PRIMARY";

/** Pause before the next try after a failure, so that a dead address is not hammered. */
const RETRY_PAUSE_MS = 100;

/**
 * Whether `e` says the node cannot serve the call now while another node may: it is down or
 * unreachable (`UNAVAILABLE`, the connection reset), a replica that refused a write
 * (`FAILED_PRECONDITION` with reason `NOT_PRIMARY`), a primary past its fencing deadline or a
 * node that knows no primary yet (`UNAVAILABLE`).
 */
export function isFailover(e: SowdbError): boolean {
  if (e.code === "UNAVAILABLE") return true;
  if (e.code === "FAILED_PRECONDITION") return e.reason === NOT_PRIMARY;
  // a connection that died under an open HTTP/2 stream (the server killed) surfaces as a Node
  // socket or HTTP/2 error, which connect maps to ABORTED (ECONNRESET) or INTERNAL; the server
  // never sends those with a Node error code under them
  if (e.code === "ABORTED" || e.code === "INTERNAL" || e.code === "UNKNOWN") return connectionLost(e);
  // the streams of a connection that died are closed with RST_STREAM CANCEL by Node itself: a
  // CANCELLED that did not come from the server (the callers rule out their own signal first)
  if (e.code === "CANCELLED") return (e.cause as { isWireError?: boolean } | undefined)?.isWireError === false;
  return false;
}

/** Node's codes of a lost connection, found on the error's chain of causes. */
const LOST =
  /^(ECONNRESET|ECONNREFUSED|ECONNABORTED|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|ERR_HTTP2_|ERR_STREAM_DESTROYED|ERR_STREAM_PREMATURE_CLOSE)/;
/** connect's own messages for a connection that is gone. */
const LOST_MESSAGE = /session (closed|destroyed)|expected open session|stream closed with error code (INTERNAL_ERROR|CONNECT_ERROR)/;

function connectionLost(e: SowdbError): boolean {
  const seen = new Set<unknown>();
  for (let c: unknown = e.cause; c instanceof Error && !seen.has(c); c = c.cause) {
    seen.add(c);
    const code = (c as { code?: unknown }).code;
    if (typeof code === "string" && LOST.test(code)) return true;
    if (LOST_MESSAGE.test(c.message)) return true;
  }
  return false;
}

/** The address a replica named as the primary when it refused a write ("" when none). */
export function namedPrimary(e: SowdbError): string {
  return e.code === "FAILED_PRECONDITION" && e.reason === NOT_PRIMARY ? (e.metadata["primary"] ?? "") : "";
}

/** The error a call ends with when no node served it within the failover timeout. */
export function gaveUp(what: string, timeoutMs: number, last: SowdbError): SowdbError {
  return new SowdbError({
    code: last.code,
    message:
      `${what}: no server of the cluster served it within failoverTimeoutMs (${timeoutMs} ms); ` +
      `last error: ${last.message}`,
    fieldViolations: last.fieldViolations,
    reason: last.reason,
    metadata: last.metadata,
    cause: last,
  });
}

/**
 * Runs `call` on the primary (`write`: or on a node that may name it, see
 * {@link Nodes.findPrimary}); in a cluster, a failover failure ({@link isFailover}) makes it
 * find the primary again (the one a replica named, else by asking every server) and try once
 * more, until `settings.timeoutMs` has passed, then it throws {@link gaveUp}'s error. A client
 * of one server runs `call` once.
 */
export async function onPrimary<R>(
  nodes: Nodes,
  settings: FailoverSettings,
  signal: AbortSignal,
  what: string,
  call: (channel: Channel) => Promise<R>,
  write = false,
): Promise<R> {
  const deadline = Date.now() + settings.timeoutMs;
  for (;;) {
    const channel = await nodes.findPrimary(signal, deadline, write);
    try {
      return await call(channel);
    } catch (err) {
      const e = toSowdbError(err);
      if (!nodes.cluster || signal.aborted || !isFailover(e)) throw e;
      failedOn(nodes, channel, e);
      if (Date.now() >= deadline) throw gaveUp(what, settings.timeoutMs, e);
      await pause(RETRY_PAUSE_MS, signal);
    }
  }
}

/** What a failover failure of a call on `channel` teaches: the primary a replica named, or,
 * when `channel` was the primary known, that it is not (any more). */
export function failedOn(nodes: Nodes, channel: Channel, e: SowdbError): void {
  const named = namedPrimary(e);
  if (named) nodes.learn(named);
  else if (nodes.known === channel) nodes.learn(undefined);
}

/**
 * Runs the read `call` where `settings.readFrom` sends it: on the primary ({@link onPrimary}),
 * or on any node, trying the next on a failover failure until the timeout.
 */
export async function onReader<R>(
  nodes: Nodes,
  settings: FailoverSettings,
  signal: AbortSignal,
  what: string,
  call: (channel: Channel) => Promise<R>,
): Promise<R> {
  if (settings.readFrom === "primary" || !nodes.cluster) return onPrimary(nodes, settings, signal, what, call);
  const deadline = Date.now() + settings.timeoutMs;
  for (;;) {
    let last: SowdbError | undefined;
    for (const channel of nodes.rotation()) {
      try {
        return await call(channel);
      } catch (err) {
        const e = toSowdbError(err);
        if (signal.aborted || !isFailover(e)) throw e;
        last = e;
      }
    }
    if (Date.now() >= deadline) throw gaveUp(what, settings.timeoutMs, last!);
    await pause(RETRY_PAUSE_MS, signal);
  }
}
