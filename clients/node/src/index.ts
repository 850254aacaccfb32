/**
 * `@sowdb/client`: the Node.js / TypeScript SDK of sowdb.
 *
 * ```ts
 * import { createClient, Mirror } from "@sowdb/client";
 * const client = createClient({ address: "127.0.0.1:9007" });
 * await client.publish("orders", [{ orderId: 1, symbol: "SYM1", price: 120 }]);
 * for await (const rec of client.sow("orders", { filter: "/symbol = 'SYM1'" })) console.log(rec.data);
 * ```
 */
export {
  type ClientOptions,
  type ClusterNode,
  DEFAULT_FAILOVER_TIMEOUT_MS,
  DEFAULT_KEEPALIVE_MS,
  MIN_KEEPALIVE_MS,
  SERVICE_NAME,
  SowdbClient,
  type TlsOptions,
  createClient,
} from "./client.js";
export { SowResult, Subscription } from "./streams.js";
export {
  type FieldViolation,
  PublishError,
  type PublishErrorInit,
  SHUT_DOWN_UNDER_THE_CALL,
  SowdbError,
  type SowdbErrorInit,
  type StatusCode,
  fromStatus,
  toSowdbError,
} from "./errors.js";
export {
  type CompletedEvent,
  type DeletedEvent,
  type EventKind,
  type GroupBeginEvent,
  type GroupEndEvent,
  type HeartbeatEvent,
  Mirror,
  type OofEvent,
  type OofReason,
  type PublishEvent,
  type SowBatchEvent,
  type SowEvent,
  type SubscribedEvent,
  mergeDelta,
} from "./events.js";
export {
  type BookmarkInput,
  type CallOptions,
  type ConflationOptions,
  DEFAULT_ADDRESS,
  DEFAULT_BATCH_SIZE,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_PUBLISH_BATCH,
  type JsonInput,
  Message,
  type PublishAck,
  type PublishItem,
  type PublishOptions,
  type QueryOptions,
  type ReplaceOptions,
  type SowAndSubscribeOptions,
  type SowDeleteOptions,
  type SowDeleteResult,
  type SowOptions,
  SowRecord,
  type StatsOptions,
  type SubscribeOptions,
  type SubscriptionFlags,
  type TopicInfo,
} from "./types.js";
export type {
  JournalStats,
  RpcStats,
  ServerStats,
  StatsResponse,
  SubscriptionStats,
  TopicStats,
} from "./gen/sowdb/v1/admin_pb.js";
