/**
 * The client's security options (SPEC §11): `token` is sent as `authorization: Bearer TOKEN`
 * metadata on every call, `tls` opens a TLS channel. Checked against a small HTTP/2 endpoint in
 * the test that records what it receives and answers every call with gRPC status UNIMPLEMENTED,
 * and against a live sowd with TLS and token users. Also: a call a stopping server dropped
 * (a Python grpcio server that drops them every time) is UNAVAILABLE, not CANCELLED.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, test } from "node:test";
import { Code, type ConnectError } from "@connectrpc/connect";
import { SHUT_DOWN_UNDER_THE_CALL, SowdbError, createClient } from "@sowdb/client";
import { type Sowd, TEST_CONFIG, python, startSowd } from "./server.ts";

const REPO = resolve(import.meta.dirname, "..", "..", "..");

interface Seen {
  path: string;
  authorization: string | undefined;
}

function answerUnimplemented(seen: Seen[]) {
  return (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
    seen.push({ path: String(headers[":path"]), authorization: headers["authorization"] as string | undefined });
    stream.respond(
      { ":status": 200, "content-type": "application/grpc", "grpc-status": "12", "grpc-message": "not here" },
      { endStream: true },
    );
  };
}

async function listen(server: http2.Http2Server | http2.Http2SecureServer): Promise<string> {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "OK";
  } catch (e) {
    assert.ok(e instanceof SowdbError);
    return e.code;
  }
}

describe("token", () => {
  let sowd: Sowd;
  before(async () => {
    sowd = await startSowd();
  });
  after(async () => {
    await sowd?.stop();
  });

  test("every call carries authorization: Bearer TOKEN", async () => {
    const seen: Seen[] = [];
    const server = http2.createServer();
    server.on("stream", answerUnimplemented(seen));
    const address = await listen(server);
    const client = createClient({ address, token: "s3cret" });
    assert.equal(await code(client.ping()), "UNIMPLEMENTED");
    assert.equal(await code(client.listTopics()), "UNIMPLEMENTED");
    assert.equal(await code(client.sow("orders").toArray()), "UNIMPLEMENTED");
    assert.equal(await code(client.publish("orders", [{ orderId: 1 }])), "UNIMPLEMENTED");
    const sub = client.subscribe("orders");
    assert.equal(await code((async () => { for await (const _ of sub) { /* none */ } })()), "UNIMPLEMENTED");
    assert.deepEqual(
      seen.map((s) => [s.path, s.authorization]),
      [
        ["/grpc.health.v1.Health/Check", "Bearer s3cret"],
        ["/sowdb.v1.SowService/ListTopics", "Bearer s3cret"],
        ["/sowdb.v1.SowService/Sow", "Bearer s3cret"],
        ["/sowdb.v1.SowService/Publish", "Bearer s3cret"],
        ["/sowdb.v1.SowService/Subscribe", "Bearer s3cret"],
      ],
    );
    client.close();
    server.close();
  });

  test("a client with a token works against a sowd without security (which ignores it)", async () => {
    const client = createClient({ address: sowd.address, token: "s3cret" });
    assert.ok((await client.ping()) >= 0);
    assert.equal((await client.publish("orders", [{ orderId: 1 }])).count, 1);
    client.close();
  });

  test("no token: no authorization header", async () => {
    const seen: Seen[] = [];
    const server = http2.createServer();
    server.on("stream", answerUnimplemented(seen));
    const client = createClient({ address: await listen(server) });
    await code(client.ping());
    assert.equal(seen[0]?.authorization, undefined);
    client.close();
    server.close();
  });
});

let openssl = true;
try {
  execFileSync("openssl", ["version"], { stdio: "ignore" });
} catch {
  openssl = false;
}

describe("tls", { skip: openssl ? false : "openssl is not installed" }, () => {
  let dir: string;
  let server: http2.Http2SecureServer;
  let address: string;
  const seen: Seen[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "sowdb-tls-"));
    execFileSync(
      "openssl",
      ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
       "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
       "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")],
      { stdio: "ignore" },
    );
    server = http2.createSecureServer({ key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) });
    server.on("stream", answerUnimplemented(seen));
    address = await listen(server);
  });

  after(() => {
    server?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("tls with the server's CA (a file path, or PEM bytes) reaches the server over TLS", async () => {
    for (const ca of [join(dir, "cert.pem"), readFileSync(join(dir, "cert.pem"))]) {
      const client = createClient({ address, tls: { ca }, token: "t" });
      assert.equal(await code(client.ping()), "UNIMPLEMENTED"); // the handshake passed, the call got there
      client.close();
    }
    assert.equal(seen.length, 2);
    assert.equal(seen[0]?.authorization, "Bearer t");
  });

  test("tls: true verifies against the system CAs, which did not sign this certificate", async () => {
    const client = createClient({ address, tls: true });
    const c = await code(client.ping());
    assert.notEqual(c, "UNIMPLEMENTED");
    assert.notEqual(c, "OK");
    client.close();
  });

  test("a plaintext client cannot talk to a TLS server", async () => {
    const client = createClient({ address });
    const c = await code(client.ping({ timeoutMs: 2000 }));
    assert.notEqual(c, "UNIMPLEMENTED");
    assert.notEqual(c, "OK");
    client.close();
  });
});

describe("a secured sowd (TLS and token users)", { skip: openssl ? false : "openssl is not installed" }, () => {
  let dir: string;
  let sowd: Sowd;
  let ca: Buffer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "sowdb-secured-"));
    execFileSync(
      "openssl",
      ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
       "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
       "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")],
      { stdio: "ignore" },
    );
    ca = readFileSync(join(dir, "cert.pem"));
    const hash = (token: string) => createHash("sha256").update(token).digest("hex");
    writeFileSync(
      join(dir, "users.toml"),
      `[[user]]\nname = "ann"\ntoken_sha256 = "${hash("s3cret")}"\nroles = ["fx"]\n` +
        `[[user]]\nname = "etl"\ntoken_sha256 = "${hash("l0ader")}"\nroles = ["loader"]\n`,
    );
    const security = `
[security]
tls_cert = "${join(dir, "cert.pem")}"
tls_key = "${join(dir, "key.pem")}"
users_file = "${join(dir, "users.toml")}"

[[role]]
name = "fx"
read = ["orders"]
write = ["orders"]
filter = "/desk = 'FX'"

[[role]]
name = "loader"
write = ["orders"]
`;
    sowd = await startSowd(TEST_CONFIG + security);
  });

  after(async () => {
    await sowd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("with the CA and a token: publish, and read and write under the row entitlement", async () => {
    const loader = createClient({ address: sowd.address, tls: { ca }, token: "l0ader" });
    await loader.publish("orders", [{ orderId: 1, desk: "FX" }, { orderId: 2, desk: "EQ" }]);
    loader.close();
    const client = createClient({ address: sowd.address, tls: { ca }, token: "s3cret" });
    const rows = await client.sow("orders").toArray();
    assert.deepEqual(rows.map((r) => r.data), [{ orderId: 1, desk: "FX" }]);
    assert.equal(await code(client.sow("quotes").toArray()), "PERMISSION_DENIED");
    // a role with a row filter writes only inside its rows (issue 26): not over desk EQ's order 2
    assert.equal(await code(client.publish("orders", [{ orderId: 2, desk: "FX" }])), "PERMISSION_DENIED");
    client.close();
  });

  test("no token, or a wrong one: UNAUTHENTICATED", async () => {
    for (const token of [undefined, "wrong"]) {
      const client = createClient({ address: sowd.address, tls: { ca }, ...(token ? { token } : {}) });
      assert.equal(await code(client.listTopics()), "UNAUTHENTICATED");
      client.close();
    }
  });

  test("a plaintext client against the TLS port fails", async () => {
    const client = createClient({ address: sowd.address, token: "s3cret" });
    const c = await code(client.listTopics({ timeoutMs: 3000 }));
    assert.notEqual(c, "OK");
    client.close();
  });
});

describe("a server that stops under a call", () => {
  // `tests/client/stopping_server.py` (the Python SDK's test has its story): its health check
  // holds its event loop, then stops it; the calls that arrived meanwhile never reach a handler
  // and gRPC core ends them with CANCELLED (grpc/grpc#41785)
  test("the calls it dropped fail with UNAVAILABLE, saying to retry", async () => {
    const proc = spawn(python(), ["-m", "tests.client.stopping_server"], {
      cwd: REPO,
      env: { ...process.env, PYTHONUNBUFFERED: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = ""; // gRPC prints the handlers it cancelled: shown only when the server fails
    proc.stderr!.on("data", (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((r) => proc.once("exit", r));
    try {
      const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
      const address = `127.0.0.1:${Number((await lines.next()).value)}`;
      const client = createClient({ address });
      const held = code(client.ping());
      assert.equal((await lines.next()).value, "holding");
      // the server asked core for its next call of each method before its loop was held
      const first = [code(client.ping()), code(client.publish("orders", [{ orderId: 0 }]))];
      await new Promise((r) => setTimeout(r, 500));
      const dropped = await Promise.allSettled([1, 2, 3].map((i) => client.publish("orders", [{ orderId: i }])));
      await Promise.all([held, ...first]);
      for (const outcome of dropped) {
        assert.equal(outcome.status, "rejected");
        const e = outcome.reason as SowdbError;
        assert.ok(e instanceof SowdbError, String(e));
        assert.equal(e.code, "UNAVAILABLE", e.message);
        assert.ok(e.message.includes(SHUT_DOWN_UNDER_THE_CALL), e.message);
        const wire = e.cause as ConnectError; // what the server sent
        assert.deepEqual([wire.code, wire.isWireError], [Code.Canceled, true]);
      }
      client.close();
      assert.equal(await exited, 0, stderr);
    } finally {
      proc.kill();
    }
  });
});
