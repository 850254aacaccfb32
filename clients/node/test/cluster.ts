/**
 * A cluster of real processes for the Node tests (SPEC §13), as tests/cluster/ starts one for the
 * Python tests, through the project's one launcher of each: etcd by `python -m
 * sowdb.testing.etcd` (Debian's etcd on free ports, its data in a temporary directory), `sowd`
 * nodes by `python -m sowdb.testing` (see server.ts), each with its own data directory and
 * port, advertising the address it bound; and the network faults by the one fault proxy,
 * `python -m sowdb.testing.faultproxy`. Each stops when its standard input closes, so a test
 * run that dies leaves none behind.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { type ClusterNode, createClient } from "@sowdb/client";
import { until } from "./helpers.ts";
import { type Sowd, python, startSowd } from "./server.ts";

const REPO = resolve(import.meta.dirname, "..", "..", "..");

/** The cluster's topics: one keyed topic with history (a sowAndSubscribe resumes as of a
 * bookmark, H-3), and heartbeats every 200 ms. */
const TOPICS = `
[server]
heartbeat = "200ms"

[[topic]]
name = "orders"
key = ["/orderId"]
history = { window = "1d" }
`;

/** Lease TTL of the tests' clusters: a failover takes this plus a loop or two. */
export const LEASE_TTL_S = 2;

/**
 * A process of the project's test launchers, `python -m sowdb.testing.MODULE` (cwd the
 * repository, the interpreter of server.ts): started once it printed the line `banner` matches
 * (its first group kept), then driven by lines on its standard input, each answered by one line.
 * It stops when its standard input closes or on SIGTERM, so a test run that dies leaves nothing.
 */
class Launched {
  private readonly proc: ChildProcess;
  private readonly what: string;
  /** The commands sent, in order, waiting for their answer line. */
  private readonly pending: ((line: string) => void)[] = [];
  /** Everything it printed so far. */
  private out = "";

  private constructor(proc: ChildProcess, what: string) {
    this.proc = proc;
    this.what = what;
  }

  static async start(module: string, args: string[], banner: RegExp): Promise<[Launched, string]> {
    const proc = spawn(python(), ["-m", module, ...args], {
      cwd: REPO,
      env: { ...process.env, PYTHONUNBUFFERED: "1" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    const launched = new Launched(proc, module);
    proc.stdin!.on("error", () => undefined); // a command to one that ended: its answer times out
    proc.stderr!.on("data", (b: Buffer) => (launched.out += b.toString()));
    const lines = createInterface({ input: proc.stdout! });
    const first = await new Promise<string>((resolveLine, reject) => {
      const timer = setTimeout(() => reject(new Error(`${module} did not start in 60 s:\n${launched.out}`)), 60_000);
      const exited = (code: number | null) => {
        clearTimeout(timer);
        reject(new Error(`${module} exited with ${code}:\n${launched.out}`));
      };
      proc.once("exit", exited);
      lines.on("line", (line) => {
        launched.out += line + "\n";
        const m = banner.exec(line);
        if (m) {
          clearTimeout(timer);
          proc.off("exit", exited);
          resolveLine(m[1]!);
        } else {
          launched.pending.shift()?.(line);
        }
      });
    }).catch((e: unknown) => {
      proc.kill("SIGKILL");
      throw e;
    });
    return [launched, first];
  }

  /** Sends `command` and resolves with its answer, once it is `expected` (else rejects). */
  async send(command: string, expected: string): Promise<void> {
    const answer = new Promise<string>((resolveAnswer, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.what}: no answer to ${command}:\n${this.out}`)), 10_000);
      this.pending.push((line) => {
        clearTimeout(timer);
        resolveAnswer(line);
      });
    });
    this.proc.stdin!.write(command + "\n");
    const line = await answer;
    if (line !== expected) throw new Error(`${this.what}: ${command} answered ${JSON.stringify(line)}`);
  }

  /** SIGTERM (SIGKILL after 10 s); resolves once it exited. */
  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const exited = new Promise((r) => this.proc.once("exit", r));
      this.proc.kill("SIGTERM");
      const timer = setTimeout(() => this.proc.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    }
  }
}

/** A running etcd of one member: the project's one etcd launcher, `python -m sowdb.testing.etcd`
 * (free client and peer ports on 127.0.0.1, its data and log in a temporary directory), once
 * healthy. */
export class Etcd {
  readonly url: string;
  private readonly launcher: Launched;
  private readonly dir: string;

  private constructor(url: string, launcher: Launched, dir: string) {
    this.url = url;
    this.launcher = launcher;
    this.dir = dir;
  }

  static async start(): Promise<Etcd> {
    const dir = mkdtempSync(join(tmpdir(), "sowdb-etcd-"));
    try {
      const [launcher, url] = await Launched.start("sowdb.testing.etcd", ["--dir", dir], /^etcd listening on (\S+)/);
      return new Etcd(url, launcher, dir);
    } catch (e) {
      rmSync(dir, { recursive: true, force: true });
      throw e;
    }
  }

  /** SIGSTOP: etcd holds every request (a cluster without etcd); {@link resume} undoes it. */
  pause(): Promise<void> {
    return this.launcher.send("pause", "ok");
  }

  resume(): Promise<void> {
    return this.launcher.send("resume", "ok");
  }

  async stop(): Promise<void> {
    await this.launcher.stop(); // it resumes etcd, should it be paused, and stops it
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** etcd and the `sowd` nodes started on it. */
export class Cluster {
  readonly nodes = new Map<string, Sowd>();
  readonly etcd: Etcd;

  private constructor(etcd: Etcd) {
    this.etcd = etcd;
  }

  /** etcd, then `names` started at once (each waits for its banner). */
  static async start(names: string[]): Promise<Cluster> {
    const cluster = new Cluster(await Etcd.start());
    try {
      await Promise.all(names.map((n) => cluster.startNode(n)));
    } catch (e) {
      await cluster.stop();
      throw e;
    }
    return cluster;
  }

  config(): string {
    return `${TOPICS}
[cluster]
name = "t"
etcd = ["${this.etcd.url}"]
ack = "sync"
sync_replicas = 1
lease_ttl = "${LEASE_TTL_S}s"
`;
  }

  async startNode(name: string, again?: Sowd): Promise<Sowd> {
    const args = ["--node", name, "--advertise", "127.0.0.1:0"];
    const sowd = again
      ? await startSowd(this.config(), [...args, "--listen", again.address], { dataDir: again.dataDir })
      : await startSowd(this.config(), args);
    this.nodes.set(name, sowd);
    sowd.proc.once("close", () => {
      // (its output read to the end) as its supervisor would: a node whose journal forked (a
      // replica that had entries the new primary never got) stops, and cuts the fork "at its
      // next start"; so does one that copied a checkpoint, to install it. Same address and data.
      if (!this.stopping && this.nodes.get(name) === sowd && sowd.output().includes("at its next start")) {
        this.restarting = this.startNode(name, sowd).then(() => undefined);
      }
    });
    return sowd;
  }

  private stopping = false;
  /** A restart under way (awaited by {@link stop}). */
  private restarting: Promise<void> = Promise.resolve();

  /** Every node's address, in name order. */
  addresses(): string[] {
    return [...this.nodes.keys()].sort().map((n) => this.nodes.get(n)!.address);
  }

  /** A node's own row of ClusterStatus (undefined: it does not answer). */
  async own(name: string): Promise<ClusterNode | undefined> {
    const client = createClient({ address: this.nodes.get(name)!.address });
    try {
      return (await client.clusterStatus({ timeoutMs: 2000 }))[0];
    } catch {
      return undefined;
    } finally {
      client.close();
    }
  }

  /** The node that says it is primary, once one does (among `among`, default all). */
  async primary(among: string[] = [...this.nodes.keys()], ms = 30_000): Promise<string> {
    let found = "";
    await until(
      async () => {
        for (const n of among) if ((await this.own(n))?.role === "primary") found = n;
        return found !== "";
      },
      ms,
      "a primary",
    );
    return found;
  }

  /** `kill -9` of the node's `sowd` itself (not its launcher), as a crash; resolves once gone. */
  async kill9(name: string): Promise<void> {
    const sowd = this.nodes.get(name)!;
    const launcher = sowd.proc.pid!;
    const child = Number(readFileSync(`/proc/${launcher}/task/${launcher}/children`, "utf8").trim().split(/\s+/)[0]);
    if (!(child > 0)) throw new Error(`no sowd under launcher ${launcher}`);
    const exited = new Promise((r) => sowd.proc.once("exit", r));
    process.kill(child, "SIGKILL");
    await exited; // the launcher ends when its sowd does
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.restarting.catch(() => undefined);
    await Promise.all([...this.nodes.values()].map((n) => n.stop()));
    await this.etcd.stop();
  }
}

/**
 * A TCP proxy to `target` that can go silent (a partition, a blackholed host) or slow: the
 * project's one fault proxy, `python -m sowdb.testing.faultproxy`. Each change is in effect once
 * its promise resolves (the proxy answered `ok MODE`).
 */
export class SilentProxy {
  readonly address: string;
  private readonly launcher: Launched;

  private constructor(address: string, launcher: Launched) {
    this.address = address;
    this.launcher = launcher;
  }

  static async start(target: string): Promise<SilentProxy> {
    const [launcher, address] = await Launched.start(
      "sowdb.testing.faultproxy",
      ["--target", target],
      /^proxy listening on (\S+)/,
    );
    return new SilentProxy(address, launcher);
  }

  /** Nothing passes any more, either way, on its connections open now or made later; they are
   * kept open, with no error (`blackhole`: what is sent meanwhile is held until {@link back}). */
  goSilent(): Promise<void> {
    return this.launcher.send("blackhole", "ok blackhole");
  }

  /** Every chunk passes, either way, `delayS` seconds late (`forward DELAY_S`). */
  slow(delayS: number): Promise<void> {
    return this.launcher.send(`forward ${delayS}`, "ok forward");
  }

  /** Bytes pass again at once (`forward`), what was held included. */
  back(): Promise<void> {
    return this.launcher.send("forward", "ok forward");
  }

  /** Its connections are closed, and new ones as soon as accepted (`cut`). */
  cut(): Promise<void> {
    return this.launcher.send("cut", "ok cut");
  }

  close(): Promise<void> {
    return this.launcher.stop();
  }
}
