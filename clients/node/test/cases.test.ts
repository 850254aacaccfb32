/**
 * The SDKs' shared cases (`clients/cases/cases.json`; its README says the format) run by the Node
 * SDK against a live sowd with `tests/topics.toml`: the Python, Java and Go SDKs run the same
 * table, so one call means one thing in every language.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { SowdbError, type SowdbClient, createClient } from "@sowdb/client";
import { type Sowd, startSowd } from "./server.ts";

type Doc = Record<string, unknown>;
interface Step {
  op: "publish" | "sow" | "delete";
  topic: string;
  docs?: Doc[];
  filter?: string;
  order_by?: string;
  top_n?: number;
  batch_size?: number;
  select?: string;
  grouping?: string[];
  projection?: string[];
  expect?: {
    docs?: Doc[];
    deleted?: number;
    error?: { code: string; field?: string; reason?: string; column?: number };
  };
}
interface Case {
  name: string;
  steps: Step[];
}

const REPO = resolve(import.meta.dirname, "..", "..", "..");
const CASES = (JSON.parse(readFileSync(join(REPO, "clients", "cases", "cases.json"), "utf8")) as { cases: Case[] })
  .cases;

let sowd: Sowd;
let client: SowdbClient;

before(async () => {
  sowd = await startSowd();
  client = createClient({ address: sowd.address });
});

after(async () => {
  client?.close();
  await sowd?.stop();
});

/** A step's call by the protocol's option names, mapped onto the Node SDK's camelCase ones. */
async function call(step: Step): Promise<unknown> {
  switch (step.op) {
    case "publish":
      return client.publish(step.topic, step.docs ?? []);
    case "delete":
      return (await client.sowDelete(step.topic, { filter: step.filter ?? "" })).deletedCount;
    case "sow": {
      const rows = await client
        .sow(step.topic, {
          ...(step.filter !== undefined ? { filter: step.filter } : {}),
          ...(step.order_by !== undefined ? { orderBy: step.order_by } : {}),
          ...(step.top_n !== undefined ? { topN: step.top_n } : {}),
          ...(step.batch_size !== undefined ? { batchSize: step.batch_size } : {}),
          ...(step.select !== undefined ? { select: step.select } : {}),
          ...(step.grouping !== undefined ? { grouping: step.grouping } : {}),
          ...(step.projection !== undefined ? { projection: step.projection } : {}),
        })
        .toArray();
      return rows.map((r) => r.data as Doc);
    }
  }
}

const canonical = (d: Doc): string => JSON.stringify(d, Object.keys(d).sort());

for (const c of CASES) {
  test(c.name, async () => {
    for (const step of c.steps) {
      const expect = step.expect ?? {};
      if (expect.error) {
        const want = expect.error;
        const err = await call(step).then(
          () => assert.fail(`expected ${want.code}`),
          (e: unknown) => e,
        );
        assert.ok(err instanceof SowdbError, `expected a SowdbError, got ${String(err)}`);
        assert.equal(err.code, want.code, err.message);
        if (want.field !== undefined) assert.equal(err.field, want.field, JSON.stringify(err.fieldViolations));
        if (want.reason !== undefined) assert.equal(err.reason, want.reason, err.message);
        if (want.column !== undefined) assert.equal(err.column, want.column, JSON.stringify(err.metadata));
        continue;
      }
      const got = await call(step);
      if (expect.docs) {
        const docs = got as Doc[];
        if (step.order_by !== undefined) assert.deepEqual(docs, expect.docs);
        else assert.deepEqual(docs.map(canonical).sort(), expect.docs.map(canonical).sort());
      }
      if (expect.deleted !== undefined) assert.equal(got, expect.deleted);
    }
  });
}
