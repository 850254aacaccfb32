/** The SDK's own logic, without a server: Mirror, delta merge, error details, records. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { anyPack } from "@bufbuild/protobuf/wkt";
import { Mirror, SowRecord, type SowEvent, createClient, fromStatus, mergeDelta } from "@sowdb/client";
import { BadRequestSchema, ErrorInfoSchema } from "@sowdb/client/gen/google/rpc/error_details_pb";
import { StatusSchema } from "@sowdb/client/gen/google/rpc/status_pb";

const rec = (topic: string, key: string, bookmark: bigint, data: unknown) => new SowRecord(topic, key, bookmark, 1_700_000_000_123_456, data);

test("Mirror keys records by (topic, SowKey) and applies sow, publish, oof and deleted", () => {
  const m = new Mirror();
  const events: SowEvent[] = [
    { kind: "subscribed", subId: "s", bookmark: 3n },
    { kind: "group_begin", queryId: "", bookmark: 3n },
    { kind: "sow", records: [rec("a", "1", 1n, { v: 1 }), rec("b", "1", 2n, { v: 2 })] },
  ];
  for (const e of events) m.apply(e);
  assert.equal(m.ready, false);
  m.apply({ kind: "group_end", queryId: "", recordsReturned: 2, recordsMatched: 2, recordsScanned: 2 });
  assert.equal(m.ready, true);
  assert.equal(m.size, 2);
  assert.deepEqual(m.get("a", "1")?.data, { v: 1 });
  assert.deepEqual(m.get("b", "1")?.data, { v: 2 });
  m.apply({ kind: "publish", records: [rec("a", "1", 4n, { v: 10 }), rec("a", "2", 5n, { v: 20 })] });
  assert.equal(m.size, 3);
  assert.deepEqual([...m.topic("a").keys()], ["1", "2"]);
  const gone = rec("a", "1", 6n, { v: 10 });
  m.apply({ kind: "oof", reason: "match", record: gone, records: [gone] });
  m.apply({ kind: "deleted", records: [rec("b", "1", 7n, { v: 2 }), rec("b", "never", 7n, {})] });
  assert.equal(m.size, 1);
  assert.equal(m.has("a", "1"), false);
  assert.deepEqual(m.values(), [{ v: 20 }]);
  assert.equal(m.bookmark, 7n);
  assert.deepEqual([...m].map((r) => r.sowKey), ["2"]);
  m.clear();
  assert.equal(m.size, 0);
  assert.equal(m.ready, false);
});

test("Mirror with delta merges publishes into the record held; without, replaces", () => {
  const delta = new Mirror({ delta: true });
  const plain = new Mirror();
  for (const m of [delta, plain]) {
    m.apply({ kind: "sow", records: [rec("t", "k", 1n, { id: 1, a: 1, n: { x: 1, y: 2 }, arr: [1, 2] })] });
    m.apply({ kind: "publish", records: [rec("t", "k", 2n, { id: 1, n: { y: 3 }, arr: [3] })] });
  }
  assert.deepEqual(delta.get("t", "k")?.data, { id: 1, a: 1, n: { x: 1, y: 3 }, arr: [3] });
  assert.equal(delta.get("t", "k")?.bookmark, 2n);
  assert.deepEqual(plain.get("t", "k")?.data, { id: 1, n: { y: 3 }, arr: [3] });
});

test("mergeDelta follows D-1 and does not modify its inputs", () => {
  const held = { a: 1, n: { x: 1 } };
  assert.deepEqual(mergeDelta(held, { n: { z: 2 }, b: [1] }), { a: 1, n: { x: 1, z: 2 }, b: [1] });
  assert.deepEqual(held, { a: 1, n: { x: 1 } });
  assert.deepEqual(mergeDelta({ a: { x: 1 } }, { a: 5 }), { a: 5 });
  assert.deepEqual(mergeDelta(null, { a: 1 }), { a: 1 });
});

test("SowRecord: timestamp from microseconds", () => {
  const r = rec("t", "k", 1n, {});
  assert.equal(r.timestamp.toISOString(), "2023-11-14T22:13:20.123Z");
  assert.equal(r.timestampUs, 1_700_000_000_123_456);
});

test("fromStatus reads BadRequest and ErrorInfo details (as in a PublishResponse)", () => {
  const status = create(StatusSchema, {
    code: 11,
    message: "bookmark 3 is older than the retained journal",
    details: [
      anyPack(BadRequestSchema, create(BadRequestSchema, { fieldViolations: [{ field: "bookmark", description: "old" }] })),
      anyPack(ErrorInfoSchema, create(ErrorInfoSchema, { reason: "OUT_OF_RANGE", domain: "sowdb.dev", metadata: { oldest_bookmark: "6" } })),
    ],
  });
  const err = fromStatus(status);
  assert.equal(err.code, "OUT_OF_RANGE");
  assert.equal(err.grpcCode, 11);
  assert.equal(err.field, "bookmark");
  assert.equal(err.reason, "OUT_OF_RANGE");
  assert.equal(err.oldestBookmark, 6n);
  assert.equal(err.column, undefined);
  assert.equal(err.name, "SowdbError");
  assert.ok(err instanceof Error);
});

test("an address whose port is out of 1..65535 is refused, not wrapped or dialed as port 0", () => {
  for (const address of ["127.0.0.1:99999", "127.0.0.1:0", "http://127.0.0.1:65536", "127.0.0.1:x", "[::1]:70000"]) {
    assert.throws(() => createClient({ address }), { name: "RangeError", message: /the port must be a number from 1 to 65535/ }, address);
  }
  for (const address of ["127.0.0.1:9007", "[::1]:9007", "https://db1:443", "localhost:65535"]) {
    createClient({ address }).close();
  }
});
