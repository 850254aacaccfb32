/**
 * Starts a real `sowd` for the tests (and the benchmarks) through the one launcher of the
 * Python tests, benchmarks and soaks, `python -m sowdb.testing`: port 0, a temporary data
 * directory, a test config. The launcher prints sowd's output (the `listening on` banner
 * included) and stops sowd on SIGTERM or when its standard input closes, so a test run that
 * dies leaves no server behind.
 *
 * The Python interpreter is `$SOWDB_PYTHON`, else the repository's `.venv/bin/python`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";

const REPO = resolve(import.meta.dirname, "..", "..", "..");

/**
 * The tests' topics: the one file the Python tests and the soaks read too (with
 * `[server] heartbeat = "200ms"`; a test may edit the text, as retention.test.ts does).
 */
export const TEST_CONFIG = readFileSync(join(REPO, "tests", "topics.toml"), "utf8");

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

/**
 * Starts sowd with `config` (TOML text; the test config by default) and waits for its banner.
 * `dataDir`: an earlier sowd's, to start it again (a supervisor's restart; removed with it).
 * `env`: more environment; `until`: the line to wait for instead of the banner, its first group
 * the address (e.g. `starting on`, printed while sowd loads its state).
 */
export async function startSowd(
  config: string = TEST_CONFIG,
  extraArgs: string[] = [],
  {
    dataDir: earlier,
    env = {},
    until = /listening on (\S+)/,
  }: { dataDir?: string; env?: Record<string, string>; until?: RegExp } = {},
): Promise<Sowd> {
  const dir = mkdtempSync(join(tmpdir(), "sowdb-node-"));
  const cfgPath = join(dir, "sowd.toml");
  writeFileSync(cfgPath, config);
  const dataDir = earlier ?? join(dir, "data");
  const proc = spawn(
    python(),
    ["-m", "sowdb.testing", "--data-dir", dataDir, "--config", cfgPath, ...extraArgs],
    { cwd: REPO, env: { ...process.env, ...env, PYTHONUNBUFFERED: "1" }, stdio: ["pipe", "pipe", "pipe"] },
  );
  let out = "";
  proc.stderr!.on("data", (b: Buffer) => (out += b.toString()));
  const lines = createInterface({ input: proc.stdout! });
  const address = await new Promise<string>((resolveAddr, reject) => {
    const timer = setTimeout(() => reject(new Error(`sowd did not start in 60 s:\n${out}`)), 60_000);
    lines.on("line", (line) => {
      out += line + "\n";
      const m = until.exec(line);
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
      if (earlier) rmSync(dirname(earlier), { recursive: true, force: true });
    },
  };
}
