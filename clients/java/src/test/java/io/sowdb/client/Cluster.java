package io.sowdb.client;

import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * A cluster of real processes for the Java tests (SPEC §13), as the Node SDK's test/cluster.ts
 * and tests/cluster/ start one: Debian's etcd on free ports with its data in a temporary
 * directory, and {@code sowd} nodes through the one launcher (see {@link Sowd}), each with its own
 * data directory and port, advertising the address it bound.
 */
final class Cluster implements AutoCloseable {
  /** Lease TTL of the tests' clusters: a failover takes this plus a loop or two. */
  static final int LEASE_TTL_S = 2;
  /** One keyed topic with history, heartbeats every 200 ms. */
  static final String TOPICS = """
      [server]
      heartbeat = "200ms"

      [[topic]]
      name = "orders"
      key = ["/orderId"]
      history = { window = "1d" }
      """;

  final Map<String, Sowd> nodes = new TreeMap<>();
  private final Process etcd;
  private final Path etcdDir;
  private final String etcdUrl;

  private Cluster(Process etcd, Path etcdDir, String etcdUrl) {
    this.etcd = etcd;
    this.etcdDir = etcdDir;
    this.etcdUrl = etcdUrl;
  }

  private static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  static Cluster start(String... names) throws Exception {
    Path dir = Files.createTempDirectory("sowdb-java-etcd-");
    int client = freePort();
    int peer = freePort();
    String url = "http://127.0.0.1:" + client;
    String etcdBin = Files.exists(Path.of("/usr/bin/etcd")) ? "/usr/bin/etcd" : "etcd";
    Process etcd = new ProcessBuilder(etcdBin, "--name=t", "--data-dir=" + dir.resolve("etcd"),
        "--listen-client-urls=" + url, "--advertise-client-urls=" + url,
        "--listen-peer-urls=http://127.0.0.1:" + peer, "--initial-advertise-peer-urls=http://127.0.0.1:" + peer,
        "--initial-cluster=t=http://127.0.0.1:" + peer)
        .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectErrorStream(true).start();
    Cluster cluster = new Cluster(etcd, dir, url);
    try {
      HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();
      until(() -> {
        try {
          HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url + "/health"))
              .timeout(Duration.ofSeconds(1)).build(), HttpResponse.BodyHandlers.ofString());
          return r.body().contains("\"health\":\"true\"");
        } catch (Exception e) {
          if (!etcd.isAlive()) throw new IllegalStateException("etcd exited with " + etcd.exitValue());
          return false;
        }
      }, Duration.ofSeconds(30), "etcd to be healthy");
      List<Thread> starting = new ArrayList<>();
      List<Exception> failures = new ArrayList<>();
      for (String n : names) {
        Thread t = new Thread(() -> {
          try {
            cluster.startNode(n, null);
          } catch (Exception e) {
            synchronized (failures) {
              failures.add(e);
            }
          }
        });
        t.start();
        starting.add(t);
      }
      for (Thread t : starting) t.join();
      if (!failures.isEmpty()) throw failures.get(0);
    } catch (Exception e) {
      cluster.close();
      throw e;
    }
    return cluster;
  }

  private volatile boolean stopping;

  /**
   * Starts node {@code name} ({@code again}: the earlier process of it, whose address and data
   * it takes). As its supervisor would, a node that stops to cut a forked journal or to install a
   * checkpoint "at its next start" is started again.
   */
  void startNode(String name, Sowd again) throws Exception {
    List<String> args = new ArrayList<>(List.of("--node", name, "--advertise", "127.0.0.1:0"));
    if (again != null) args.addAll(List.of("--listen", again.address));
    Sowd s = Sowd.start(config(), args, again == null ? null : again.dataDir);
    synchronized (nodes) {
      nodes.put(name, s);
    }
    s.proc.onExit().thenRun(() -> {
      Publisher.awaitQuietly(200); // its output read to the end
      if (!stopping && nodes.get(name) == s && s.output().contains("at its next start")) {
        try {
          startNode(name, s);
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
    });
  }

  /** The last lines of every node's output, for a failure's message. */
  String tails() {
    StringBuilder b = new StringBuilder();
    nodes.forEach((n, s) -> {
      String[] lines = s.output().split("\n");
      b.append("--- ").append(n).append('\n');
      for (int i = Math.max(0, lines.length - 12); i < lines.length; i++) b.append(lines[i]).append('\n');
    });
    return b.toString();
  }

  String config() {
    return TOPICS + "\n[cluster]\nname = \"t\"\netcd = [\"" + etcdUrl + "\"]\nack = \"sync\"\nsync_replicas = 1\n"
        + "lease_ttl = \"" + LEASE_TTL_S + "s\"\n";
  }

  /** Every node's address, in name order. */
  List<String> addresses() {
    return nodes.values().stream().map(s -> s.address).toList();
  }

  /** A node's own row of ClusterStatus, or null when it does not answer. */
  io.sowdb.v1.ClusterNode own(String name) {
    try (SowdbClient c = SowdbClient.connect(nodes.get(name).address)) {
      return c.clusterStatus().get(0);
    } catch (RuntimeException e) {
      return null;
    }
  }

  /** The node that says it is primary and lists {@code count} nodes, once one does. */
  String settledPrimary(List<String> among, int count) {
    String[] found = {""};
    until(() -> {
      for (String n : among) {
        var own = own(n);
        if (own != null && own.getRole().equals("primary")) {
          try (SowdbClient c = SowdbClient.connect(nodes.get(n).address)) {
            if (c.clusterStatus().size() == count) {
              found[0] = n;
              return true;
            }
          } catch (RuntimeException e) {
            // not yet
          }
        }
      }
      return false;
    }, Duration.ofSeconds(60), () -> "a primary with its replicas following\n" + tails());
    return found[0];
  }

  static void until(BooleanSupplier cond, Duration within, String what) {
    until(cond, within, () -> what);
  }

  static void until(BooleanSupplier cond, Duration within, java.util.function.Supplier<String> what) {
    long end = System.nanoTime() + within.toNanos();
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > end) throw new AssertionError("timed out waiting for " + what.get());
      Publisher.awaitQuietly(50);
    }
  }

  @Override
  public void close() throws Exception {
    stopping = true;
    for (Sowd s : nodes.values()) s.close();
    etcd.destroy();
    etcd.waitFor(10, TimeUnit.SECONDS);
    try (var paths = Files.walk(etcdDir)) {
      paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
