package io.sowdb.client;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A cluster of real processes for the Java tests (SPEC §13), as the Node SDK's test/cluster.ts
 * and tests/cluster/ start one: etcd through the project's one etcd launcher,
 * {@code python -m sowdb.testing.etcd} (Debian's etcd on free ports, its data in a temporary
 * directory), and {@code sowd} nodes through the one sowd launcher (see {@link Sowd}), each with
 * its own data directory and port, advertising the address it bound.
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

  /** The etcd launcher's line once etcd is healthy. */
  static final Pattern ETCD_BANNER = Pattern.compile("etcd listening on (\\S+)");

  final Map<String, Sowd> nodes = new TreeMap<>();
  private final Process etcd;
  private final Path etcdDir;
  private final String etcdUrl;

  private Cluster(Process etcd, Path etcdDir, String etcdUrl) {
    this.etcd = etcd;
    this.etcdDir = etcdDir;
    this.etcdUrl = etcdUrl;
  }

  /**
   * etcd through the one launcher, {@code python -m sowdb.testing.etcd --dir D} (free ports, data
   * and log in {@code D}): its URL from the {@code etcd listening on URL} line it prints once etcd
   * is healthy. The launcher stops etcd when its standard input closes, so a test JVM that dies
   * leaves no etcd behind.
   */
  private static Process startEtcd(Path dir, String[] url) throws Exception {
    ProcessBuilder pb = new ProcessBuilder(Sowd.python(), "-m", "sowdb.testing.etcd", "--dir", dir.toString())
        .directory(Sowd.REPO.toFile()).redirectErrorStream(true);
    pb.environment().put("PYTHONUNBUFFERED", "1");
    Process proc = pb.start();
    StringBuffer out = new StringBuffer();
    CompletableFuture<String> found = new CompletableFuture<>();
    Thread reader = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) { // read to the end: the launcher's pipe never fills
          out.append(line).append('\n');
          Matcher m = ETCD_BANNER.matcher(line);
          if (m.find()) found.complete(m.group(1));
        }
      } catch (IOException e) {
        // the launcher ended
      }
      found.completeExceptionally(new IllegalStateException("the etcd launcher exited before its banner:\n" + out));
    }, "etcd-output");
    reader.setDaemon(true);
    reader.start();
    try {
      url[0] = found.get(60, TimeUnit.SECONDS);
      return proc;
    } catch (Exception e) {
      proc.destroyForcibly();
      throw new IllegalStateException("etcd did not start within 60 s; the launcher said:\n" + out, e);
    }
  }

  static Cluster start(String... names) throws Exception {
    Path dir = Files.createTempDirectory("sowdb-java-etcd-");
    String[] url = new String[1];
    Process etcd;
    try {
      etcd = startEtcd(dir, url);
    } catch (Exception e) {
      deleteTree(dir);
      throw e;
    }
    Cluster cluster = new Cluster(etcd, dir, url[0]);
    try {
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
    etcd.getOutputStream().close(); // the launcher stops etcd when its stdin closes
    if (!etcd.waitFor(20, TimeUnit.SECONDS)) {
      etcd.destroy(); // SIGTERM: the launcher stops etcd too
      if (!etcd.waitFor(15, TimeUnit.SECONDS)) etcd.destroyForcibly();
    }
    deleteTree(etcdDir);
  }

  private static void deleteTree(Path dir) throws IOException {
    try (var paths = Files.walk(dir)) {
      paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }
}
