/**
 * Starts a real `sowd` for the tests (and the benchmarks): `python -m sowdb.main` on port 0
 * with a temporary data directory and a test config, as tests/server/conftest.py does.
 *
 * The Python interpreter is `$SOWDB_PYTHON`, else the repository's `.venv/bin/python`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

const REPO = resolve(import.meta.dirname, "..", "..", "..");

/** The topics the tests need (the demo config's, plus a view and a few more). */
export const TEST_CONFIG = `
[server]
heartbeat = "200ms"

[[topic]]
name = "orders"
key = ["/orderId"]
indexes = ["/symbol"]

[[topic]]
name = "notes"

[[topic]]
name = "quotes"
key = ["/symbol"]
durability = "transient"

[[topic]]
name = "prices"
key = ["/symbol"]
history = { window = "1d" }

[[topic]]
name = "items"
key = ["/id"]

[[topic]]
name = "markers"
key = ["/id"]

[[view]]
name = "orders_by_symbol"
underlying = "orders"
grouping = ["/symbol"]
projection = ["/symbol", "COUNT(/orderId) AS /n"]
`;

export interface Sowd {
  /** `127.0.0.1:PORT` */
  address: string;
  proc: ChildProcess;
  dataDir: string;
  /** Everything the server printed so far. */
  output(): string;
  stop(): Promise<void>;
}

export function python(): string {
  return process.env["SOWDB_PYTHON"] ?? join(REPO, ".venv", "bin", "python");
}

/** Starts sowd with `config` (TOML text; the test config by default) and waits for its banner. */
export async function startSowd(config: string = TEST_CONFIG, extraArgs: string[] = []): Promise<Sowd> {
  const dir = mkdtempSync(join(tmpdir(), "sowdb-node-"));
  const cfgPath = join(dir, "sowd.toml");
  writeFileSync(cfgPath, config);
  const dataDir = join(dir, "data");
  const proc = spawn(
    python(),
    ["-m", "sowdb.main", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--config", cfgPath, ...extraArgs],
    { cwd: REPO, env: { ...process.env, PYTHONUNBUFFERED: "1" }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  proc.stderr!.on("data", (b: Buffer) => (out += b.toString()));
  const lines = createInterface({ input: proc.stdout! });
  const address = await new Promise<string>((resolveAddr, reject) => {
    const timer = setTimeout(() => reject(new Error(`sowd did not start in 60 s:\n${out}`)), 60_000);
    lines.on("line", (line) => {
      out += line + "\n";
      const m = /listening on (\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolveAddr(m[1]!);
      }
    });
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`sowd exited with ${code}:\n${out}`));
    });
  });
  return {
    address,
    proc,
    dataDir,
    output: () => out,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
