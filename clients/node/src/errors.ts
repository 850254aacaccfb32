/**
 * Errors carrying the server's rich details.
 *
 * Every refusal of the server arrives as a gRPC status whose `grpc-status-details-bin` trailer
 * holds a `google.rpc.Status` with `google.rpc.BadRequest` (the request field at fault) and
 * `google.rpc.ErrorInfo` (a reason, domain `sowdb.dev`, and metadata such as a filter's
 * `column`, a refused publish's `message_index` or an `OUT_OF_RANGE` bookmark's
 * `oldest_bookmark`). {@link SowdbError} exposes them as plain properties.
 */
import { anyIs, anyUnpack } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import type { Status } from "./gen/google/rpc/status_pb.js";

/** gRPC status code names, as the server and the other SDKs spell them. */
export type StatusCode =
  | "OK"
  | "CANCELLED"
  | "UNKNOWN"
  | "INVALID_ARGUMENT"
  | "DEADLINE_EXCEEDED"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "PERMISSION_DENIED"
  | "RESOURCE_EXHAUSTED"
  | "FAILED_PRECONDITION"
  | "ABORTED"
  | "OUT_OF_RANGE"
  | "UNIMPLEMENTED"
  | "INTERNAL"
  | "UNAVAILABLE"
  | "DATA_LOSS"
  | "UNAUTHENTICATED";

const CODE_NAMES: readonly StatusCode[] = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

/** One `google.rpc.BadRequest.FieldViolation`: the request field at fault and why. */
export interface FieldViolation {
  field: string;
  description: string;
}

/** What a {@link SowdbError} is made of. */
export interface SowdbErrorInit {
  code: StatusCode;
  message: string;
  fieldViolations?: FieldViolation[];
  reason?: string;
  metadata?: Record<string, string>;
  cause?: unknown;
}

/**
 * A refusal or failure reported by the server (or by the transport: `UNAVAILABLE`,
 * `DEADLINE_EXCEEDED`, `CANCELLED`).
 *
 * ```ts
 * try { for await (const r of client.sow("orders", { filter: "/price >" })) {} }
 * catch (e) { if (e instanceof SowdbError) console.log(e.code, e.field, e.column, e.message); }
 * // INVALID_ARGUMENT filter 9 expected an operand at column 9 (end of input)
 * ```
 */
export class SowdbError extends Error {
  /** The gRPC status code name, e.g. `INVALID_ARGUMENT`. */
  readonly code: StatusCode;
  /** The numeric gRPC status code (3 for `INVALID_ARGUMENT`). */
  readonly grpcCode: number;
  /** (field, description) pairs from `google.rpc.BadRequest`. */
  readonly fieldViolations: FieldViolation[];
  /** `google.rpc.ErrorInfo.reason` (e.g. `EXPRESSION_ERROR`), or "". */
  readonly reason: string;
  /** `google.rpc.ErrorInfo.metadata` (e.g. `{ column: "9", token: "" }`). */
  readonly metadata: Record<string, string>;

  constructor(init: SowdbErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "SowdbError";
    this.code = init.code;
    this.grpcCode = Math.max(0, CODE_NAMES.indexOf(init.code));
    this.fieldViolations = init.fieldViolations ?? [];
    this.reason = init.reason ?? "";
    this.metadata = init.metadata ?? {};
  }

  /** The first request field the server named (`filter`, `batch_size`, `messages[3]`, ...). */
  get field(): string | undefined {
    return this.fieldViolations[0]?.field;
  }

  /** For expression errors (filter, order_by, ...): the 1-based column of the offending token. */
  get column(): number | undefined {
    const c = this.metadata["column"];
    return c ? Number(c) : undefined;
  }

  /** For `OUT_OF_RANGE`: the oldest bookmark the server still has. */
  get oldestBookmark(): bigint | undefined {
    const b = this.metadata["oldest_bookmark"];
    return b ? BigInt(b) : undefined;
  }
}

/** What {@link PublishError} adds to a {@link SowdbError}. */
export interface PublishErrorInit {
  /** Index of the refused request among those this `publish` call sent (0-based). */
  batchIndex: number;
  /** Index of the offending message in the whole `publish` call, when the server named one. */
  messageIndex: number | undefined;
  /** Messages stored before the refused batch (every earlier batch was stored, in order). */
  stored: number;
  /** Bookmarks of the first and last message stored before the refused batch (0n: none). */
  firstBookmark: bigint;
  lastBookmark: bigint;
}

/**
 * A publish request was refused: nothing of that request, and nothing after it, was stored
 * (every request carries `stop_on_error`, so the server applies no later request of the call
 * even when the client had already sent it); the `stored` messages before it are stored.
 */
export class PublishError extends SowdbError {
  readonly batchIndex: number;
  readonly messageIndex: number | undefined;
  readonly stored: number;
  readonly firstBookmark: bigint;
  readonly lastBookmark: bigint;

  constructor(base: SowdbError, info: PublishErrorInit) {
    super({
      code: base.code,
      message: base.message,
      fieldViolations: base.fieldViolations,
      reason: base.reason,
      metadata: base.metadata,
    });
    this.name = "PublishError";
    this.batchIndex = info.batchIndex;
    this.messageIndex = info.messageIndex;
    this.stored = info.stored;
    this.firstBookmark = info.firstBookmark;
    this.lastBookmark = info.lastBookmark;
  }
}

function codeName(code: number): StatusCode {
  return CODE_NAMES[code] ?? "UNKNOWN";
}

/** The {@link SowdbError} for a `google.rpc.Status` (as in a PublishResponse). */
export function fromStatus(status: Status): SowdbError {
  const fieldViolations: FieldViolation[] = [];
  let reason = "";
  let metadata: Record<string, string> = {};
  for (const detail of status.details) {
    if (anyIs(detail, BadRequestSchema)) {
      const bad = anyUnpack(detail, BadRequestSchema);
      for (const v of bad?.fieldViolations ?? []) fieldViolations.push({ field: v.field, description: v.description });
    } else if (anyIs(detail, ErrorInfoSchema)) {
      const info = anyUnpack(detail, ErrorInfoSchema);
      if (info) {
        reason = info.reason;
        metadata = { ...info.metadata };
      }
    }
  }
  return new SowdbError({ code: codeName(status.code), message: status.message, fieldViolations, reason, metadata });
}

/**
 * What a `CANCELLED` sent by the server means. gRPC core ends the calls that reached a server
 * but no handler yet with `CANCELLED` when that server stops (grpc/grpc#41785), where
 * `UNAVAILABLE` is meant; sowd never ends a call with `CANCELLED` itself. Reported as
 * `UNAVAILABLE`, so that a caller retries it and a server list moves on, as for every other
 * failure of a server going away. A `CANCELLED` this side made (its signal, a lost connection)
 * stays `CANCELLED`.
 */
export const SHUT_DOWN_UNDER_THE_CALL =
  "the server dropped the call as it shut down, before handling it; retry (in a cluster, on another node)";

/** The {@link SowdbError} for anything a call threw (a ConnectError, an abort, a bug). */
export function toSowdbError(err: unknown): SowdbError {
  if (err instanceof SowdbError) return err;
  const ce = ConnectError.from(err);
  const fieldViolations: FieldViolation[] = [];
  for (const bad of ce.findDetails(BadRequestSchema)) {
    for (const v of bad.fieldViolations) fieldViolations.push({ field: v.field, description: v.description });
  }
  const info = ce.findDetails(ErrorInfoSchema)[0];
  if (ce.code === Code.Canceled && ce.isWireError) {
    return new SowdbError({ code: "UNAVAILABLE", message: `${SHUT_DOWN_UNDER_THE_CALL} [${ce.rawMessage}]`, cause: err });
  }
  return new SowdbError({
    code: codeName(ce.code),
    message: ce.rawMessage,
    fieldViolations,
    reason: info?.reason ?? "",
    metadata: info ? { ...info.metadata } : {},
    cause: err,
  });
}

/** True for the error a call ends with when its own signal was aborted. */
export function isCancel(err: unknown): boolean {
  return ConnectError.from(err).code === Code.Canceled;
}
