/**
 * A cluster of real processes for the Node tests (SPEC §13), as tests/cluster/ starts one for the
 * Python tests: Debian's etcd on free ports with its data in a temporary directory, and `sowd`
 * nodes through the one launcher (`python -m sowdb.testing`, see server.ts), each with its own
 * data directory and port, advertising the address it bound.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ClusterNode, createClient } from "@sowdb/client";
import { until } from "./helpers.ts";
import { type Sowd, startSowd } from "./server.ts";

const ETCD = existsSync("/usr/bin/etcd") ? "/usr/bin/etcd" : "etcd";

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

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** A running etcd of one member. */
export class Etcd {
  readonly url: string;
  private readonly proc: ChildProcess;
  private readonly dir: string;

  private constructor(url: string, proc: ChildProcess, dir: string) {
    this.url = url;
    this.proc = proc;
    this.dir = dir;
  }

  static async start(): Promise<Etcd> {
    const dir = mkdtempSync(join(tmpdir(), "sowdb-etcd-"));
    const [client, peer] = [await freePort(), await freePort()];
    const url = `http://127.0.0.1:${client}`;
    const proc = spawn(
      ETCD,
      [
        "--name=t",
        `--data-dir=${join(dir, "etcd")}`,
        `--listen-client-urls=${url}`,
        `--advertise-client-urls=${url}`,
        `--listen-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-cluster=t=http://127.0.0.1:${peer}`,
      ],
      { stdio: "ignore" },
    );
    const etcd = new Etcd(url, proc, dir);
    await until(
      async () => {
        if (proc.exitCode !== null) throw new Error(`etcd exited with ${proc.exitCode}`);
        try {
          const reply = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
          return ((await reply.json()) as { health?: string }).health === "true";
        } catch {
          return false;
        }
      },
      30_000,
      "etcd to be healthy",
    );
    return etcd;
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const exited = new Promise((r) => this.proc.once("exit", r));
      this.proc.kill("SIGTERM");
      await exited;
    }
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

/** A TCP proxy to `target` that can go silent (a partition, a blackholed host): it keeps its
 * connections open but passes nothing more on them, either way or only the server's replies (a
 * request applied whose answer is lost); connections made after that pass as usual. */
export class SilentProxy {
  readonly address: string;
  private readonly server: import("node:net").Server;
  /** Per connection: [client to server passes, server to client passes]. */
  private readonly open = new Map<import("node:net").Socket, [boolean, boolean]>();

  private constructor(address: string, server: import("node:net").Server) {
    this.address = address;
    this.server = server;
  }

  static async start(target: string): Promise<SilentProxy> {
    const { connect } = await import("node:net");
    const [host, port] = [target.slice(0, target.lastIndexOf(":")), Number(target.slice(target.lastIndexOf(":") + 1))];
    const holder: { proxy?: SilentProxy } = {};
    const server = createServer((inbound) => {
      const outbound = connect(port, host);
      const passes: [boolean, boolean] = [true, true];
      holder.proxy!.open.set(inbound, passes);
      inbound.on("data", (b) => passes[0] && outbound.write(b));
      outbound.on("data", (b) => passes[1] && inbound.write(b));
      for (const [a, b] of [
        [inbound, outbound],
        [outbound, inbound],
      ] as const) {
        a.on("error", () => b.destroy());
        a.on("close", () => {
          b.destroy();
          holder.proxy!.open.delete(inbound);
        });
      }
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const proxy = new SilentProxy(`127.0.0.1:${(server.address() as { port: number }).port}`, server);
    holder.proxy = proxy;
    return proxy;
  }

  /** On the connections open now, nothing passes any more. */
  goSilent(): void {
    for (const passes of this.open.values()) passes[0] = passes[1] = false;
  }

  /** On the connections open now, the server's replies are dropped (requests still pass). */
  dropReplies(): void {
    for (const passes of this.open.values()) passes[1] = false;
  }

  close(): void {
    for (const s of this.open.keys()) s.destroy();
    this.server.close();
  }
}
