package io.sowdb.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * A server list against etcd and three sowd (SPEC §13, rule HA-5), as the Node SDK's
 * cluster.test.ts: writes find the primary, and a {@code kill -9} of the primary under load
 * loses no acknowledged write and applies none twice (J-4 producer ids), while a subscription
 * resumes on another node with no gap and no duplicate.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ClusterTest {
  private Cluster cluster;
  private final List<SowdbClient> clients = new ArrayList<>();

  @BeforeAll
  void start() throws Exception {
    cluster = Cluster.start("n1", "n2", "n3");
  }

  @AfterAll
  void stop() throws Exception {
    for (SowdbClient c : clients) c.close();
    if (cluster != null) cluster.close();
  }

  private SowdbClient client(String address) {
    SowdbClient c = SowdbClient.builder().address(address).failoverTimeout(Duration.ofSeconds(30)).build();
    clients.add(c);
    return c;
  }

  record Delivered(long bookmark, int id) {}

  @Test
  @Order(1)
  void theClusterExampleOfTheJavaPageRunsAsWritten() throws Exception {
    List<String> names = new ArrayList<>(cluster.nodes.keySet());
    cluster.settledPrimary(names, 3);
    String block = DocsTest.blocks(DocsTest.JAVA_PAGE, "sh").get(0).replace("MirrorExample", "ClusterExample");
    Process p = DocsTest.run(block, Map.of("SOWDB_SERVERS", String.join(",", cluster.addresses())));
    String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
    assertEquals(0, p.waitFor(), out);
    List<String> lines = out.lines().filter(l -> !l.isBlank()).toList();
    assertTrue(lines.get(0).matches("stored at bookmark \\d+"), out);
    assertEquals(4, lines.size(), out);
    assertTrue(lines.get(1).matches("n\\d is primary, applied \\d+"), out);
    assertTrue(lines.get(2).matches("n\\d is replica, applied \\d+"), out);
  }

  @Test
  @Order(2)
  void killMinus9OfThePrimaryUnderLoadWritesGoOnEachOnceAndASubscriptionResumesWithNoGapAndNoDuplicate()
      throws Exception {
    List<String> names = new ArrayList<>(cluster.nodes.keySet());
    String old = cluster.settledPrimary(names, 3);
    String list = String.join(",", cluster.addresses());
    SowdbClient writer = client(list);
    assertEquals(cluster.nodes.get(old).address, writer.findPrimary());

    List<Delivered> delivered = Collections.synchronizedList(new ArrayList<>());
    AtomicReference<Throwable> subError = new AtomicReference<>();
    long[] from = {-1};
    Subscription sub = client(list).subscribe("orders", Query.of());
    Thread subscriber = new Thread(() -> {
      try {
        for (Event e : sub) {
          if (e.kind() == Event.Kind.SUBSCRIBED) from[0] = e.bookmark();
          if (e.kind() == Event.Kind.PUBLISH) {
            for (Record r : e.records()) delivered.add(new Delivered(r.bookmark(), (Integer) r.map().get("orderId")));
          }
        }
      } catch (Throwable t) {
        subError.set(t);
      }
    });
    subscriber.start();
    Cluster.until(() -> from[0] >= 0, Duration.ofSeconds(10), "subscribed");

    List<Integer> acknowledged = Collections.synchronizedList(new ArrayList<>());
    AtomicBoolean stop = new AtomicBoolean();
    AtomicReference<Throwable> loadError = new AtomicReference<>();
    List<Thread> loads = new ArrayList<>();
    for (int w = 1; w <= 2; w++) {
      int base = w * 1_000_000;
      Thread t = new Thread(() -> {
        try {
          for (int i = base; !stop.get(); i += 20) {
            int start = i;
            List<Integer> ids = IntStream.range(start, start + 20).boxed().toList();
            PublishAck ack = writer.publish("orders", ids.stream().map(id -> Map.of("orderId", id)).toList());
            assertEquals(20, ack.count());
            acknowledged.addAll(ids);
          }
        } catch (Throwable e) {
          loadError.set(e);
        }
      });
      t.start();
      loads.add(t);
    }
    Cluster.until(() -> acknowledged.size() >= 400 && delivered.size() >= 400, Duration.ofSeconds(60), "load before the kill");
    cluster.nodes.get(old).kill9();
    long killed = System.nanoTime();
    int before = acknowledged.size();
    Cluster.until(() -> acknowledged.size() >= before + 400 || loadError.get() != null, Duration.ofSeconds(60),
        "acknowledgements by the new primary");
    long failoverMs = (System.nanoTime() - killed) / 1_000_000;
    stop.set(true);
    for (Thread t : loads) t.join();
    assertNull(loadError.get(), () -> "a publish failed: " + loadError.get());

    List<String> rest = names.stream().filter(n -> !n.equals(old)).toList();
    String primary = cluster.settledPrimary(rest, 2);
    int last = acknowledged.size();
    Cluster.until(() -> subError.get() != null || new HashSet<>(ids(delivered)).size() >= last, Duration.ofSeconds(60),
        "every write delivered");
    sub.close();
    subscriber.join();
    assertNull(subError.get(), () -> "the subscription failed: " + subError.get());

    // the journal of `orders` on the new primary: the check of what was delivered and applied
    List<Delivered> journal = new ArrayList<>();
    SowdbClient check = client(cluster.nodes.get(primary).address);
    try (Subscription replay = check.subscribe("orders", Query.of().bookmark("0").timeout(Duration.ofSeconds(60)))) {
      for (Event e : replay) {
        if (e.kind() == Event.Kind.COMPLETED) break;
        if (e.kind() == Event.Kind.PUBLISH) {
          for (Record r : e.records()) journal.add(new Delivered(r.bookmark(), (Integer) r.map().get("orderId")));
        }
      }
    }
    List<Delivered> got = new ArrayList<>(delivered);
    long upTo = got.get(got.size() - 1).bookmark();
    List<Delivered> expected = journal.stream().filter(j -> j.bookmark() > from[0] && j.bookmark() <= upTo).toList();
    assertEquals(expected, got, "the subscription's records are the journal's after its point, entry for entry");
    Map<Integer, Integer> times = new HashMap<>();
    for (Delivered j : journal) times.merge(j.id(), 1, Integer::sum);
    List<Integer> wrong = new ArrayList<>(acknowledged).stream().filter(id -> times.getOrDefault(id, 0) != 1).toList();
    assertEquals(List.of(), wrong, "acknowledged writes missing or applied twice");
    assertTrue(failoverMs < (Cluster.LEASE_TTL_S + 15) * 1000L, "the first acknowledgement came " + failoverMs + " ms after the kill");
  }

  private static List<Integer> ids(List<Delivered> ds) {
    synchronized (ds) {
      return ds.stream().map(Delivered::id).toList();
    }
  }
}
