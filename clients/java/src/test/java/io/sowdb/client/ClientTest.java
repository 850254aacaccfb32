package io.sowdb.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The client against one live sowd: publish in batches, sow with its options and a historical
 * bookmark, the typed rich errors, a sowAndSubscribe with oof under a concurrent publisher (no
 * gap, no duplicate) kept in a Mirror, deadlines and cancellation.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ClientTest {
  private Sowd sowd;
  private SowdbClient client;

  @BeforeAll
  void start() throws Exception {
    sowd = Sowd.start();
    client = SowdbClient.connect(sowd.address);
  }

  @AfterAll
  void stop() throws Exception {
    if (client != null) client.close();
    if (sowd != null) sowd.close();
  }

  private static Map<String, Object> order(int id, String symbol) {
    return Map.of("orderId", id, "symbol", symbol, "price", 100.0 + id, "qty", id % 7);
  }

  @Test
  void publishBatchesByCountAndSowReadsThemBack() {
    client.sowDelete("orders_noindex", "/orderId > 0");
    List<Map<String, Object>> docs = IntStream.rangeClosed(1, 250).mapToObj(i -> order(i, "S" + i % 3)).toList();
    PublishAck ack = client.publish("orders_noindex", docs, PublishOptions.of().batchSize(100));
    assertEquals(250, ack.count());
    assertEquals(249, ack.lastBookmark() - ack.firstBookmark(), "one bookmark per message, in order");
    try (SowResult r = client.sow("orders_noindex", Query.of().filter("/symbol = 'S1'").orderBy("/orderId").batchSize(7))) {
      List<Record> got = r.toList();
      assertEquals(84, got.size());
      assertEquals(1, got.get(0).map().get("orderId"));
      assertEquals(84, r.groupEnd().getRecordsReturned());
    }
  }

  @Test
  void aRequestStaysUnderTheMessageLimitInBytes() {
    client.sowDelete("markers", "/id > 0");
    String big = "x".repeat(900_000); // each under max_document_bytes, 30 of them over a 16 MiB request
    List<Map<String, Object>> docs = IntStream.range(0, 30).mapToObj(i -> Map.<String, Object>of("id", i + 1, "text", big)).toList();
    PublishAck ack = client.publish("markers", docs); // one 100-message request would be refused
    assertEquals(30, ack.count());
    assertEquals(30, client.sow("markers").toList().size());
  }

  @Test
  void aHistoricalBookmarkGivesTheStateAsOfThen() {
    PublishAck first = client.publish("book", List.of(Map.of("id", 1, "v", "then")));
    client.publish("book", List.of(Map.of("id", 1, "v", "now")));
    assertEquals("now", client.sow("book").toList().get(0).map().get("v"));
    List<Record> then = client.sow("book", Query.of().bookmark(first.lastBookmark())).toList();
    assertEquals("then", then.get(0).map().get("v"));
  }

  @Test
  void aBadFilterIsATypedErrorWithItsFieldReasonAndColumn() {
    SowdbException.InvalidArgument e = assertThrows(SowdbException.InvalidArgument.class,
        () -> client.sow("orders", Query.of().filter("/qty >")).toList());
    assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    assertEquals("filter", e.field());
    assertEquals("EXPRESSION_ERROR", e.reason());
    assertNotNull(e.column());
  }

  @Test
  void aRequestSentAgainWithItsProducerIdAndSequenceIsAppliedOnce() {
    client.sowDelete("items", "/id > 0");
    List<Map<String, Object>> docs = IntStream.rangeClosed(1, 30).mapToObj(i -> Map.<String, Object>of("id", i)).toList();
    PublishOptions j4 = PublishOptions.of().producerId("java-test-" + System.nanoTime()).producerSeq(1).batchSize(10);
    PublishAck first = client.publish("items", docs, j4);
    assertEquals(30, first.count());
    assertEquals(0, first.duplicates());
    PublishAck again = client.publish("items", docs, j4); // the same three requests: J-4 duplicates
    assertEquals(30, again.count());
    assertEquals(30, again.duplicates());
    assertEquals(0, again.lastBookmark(), "nothing applied, so no bookmark");
    PublishAck next = client.publish("items", docs.subList(0, 10), j4.producerSeq(4)); // the next sequence
    assertEquals(0, next.duplicates());
  }

  @Test
  void aRefusedPublishSaysWhichMessageAndWhatWasStored() {
    client.sowDelete("items", "/id > 0");
    List<Object> docs = new ArrayList<>();
    for (int i = 1; i <= 5; i++) docs.add(Map.of("id", i));
    docs.add(Map.of("name", "no id"));
    PublishException e = assertThrows(PublishException.class,
        () -> client.publish("items", docs, PublishOptions.of().batchSize(2)));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    assertEquals(5, e.messageIndex());
    assertEquals(4, e.stored().count(), "the two requests before the refused one are stored");
  }

  @Test
  void sowAndSubscribeWithOofUnderAConcurrentPublisherHasNoGapAndNoDuplicate() throws Exception {
    client.sowDelete("orders", "/orderId > 0");
    client.publish("orders", IntStream.rangeClosed(1, 500).mapToObj(i -> order(i, "A")).toList());
    Map<Integer, Integer> seen = new HashMap<>();
    Mirror mirror = new Mirror();
    AtomicReference<Throwable> failed = new AtomicReference<>();
    int oofs = 0;
    long lastLive = 0;
    try (SowdbClient publisher = SowdbClient.connect(sowd.address);
        Subscription sub = client.sowAndSubscribe("orders",
            Query.of().filter("/symbol = 'A'").oof(true).batchSize(100).timeout(Duration.ofSeconds(60)))) {
      Thread writer = new Thread(() -> {
        try {
          for (int from = 501; from <= 1500; from += 50) {
            int start = from;
            publisher.publish("orders", IntStream.range(start, start + 50).mapToObj(i -> order(i, "A")).toList());
          }
          publisher.publish("orders", IntStream.rangeClosed(1, 100).mapToObj(i -> order(i, "B")).toList());
        } catch (Throwable t) {
          failed.set(t);
        }
      });
      writer.start();
      for (Event e : sub) {
        mirror.apply(e);
        switch (e.kind()) {
          case SOW, PUBLISH -> {
            for (Record r : e.records()) {
              seen.merge((Integer) r.map().get("orderId"), 1, Integer::sum);
              if (e.kind() == Event.Kind.PUBLISH) {
                assertTrue(r.bookmark() > lastLive, "live records in bookmark order");
                lastLive = r.bookmark();
              }
            }
          }
          case OOF -> {
            assertEquals("match", e.reason());
            oofs++;
          }
          default -> {}
        }
        if (seen.size() == 1500 && oofs == 100) break;
      }
      writer.join();
    }
    if (failed.get() != null) throw new AssertionError(failed.get());
    assertEquals(1500, seen.size(), "no gap");
    assertTrue(seen.values().stream().allMatch(n -> n == 1), "no duplicate");
    assertEquals(100, oofs);
    assertTrue(mirror.ready());
    assertEquals(1400, mirror.size());
    assertTrue(mirror.values().stream().allMatch(d -> d.get("symbol").equals("A")));
  }

  @Test
  void aSubscriptionsDeadlineEndsItWithDeadlineExceeded() {
    long start = System.nanoTime();
    Subscription sub = client.subscribe("pulses", Query.of().timeout(Duration.ofMillis(800)));
    assertThrows(SowdbException.DeadlineExceeded.class, () -> {
      for (Event e : sub) {
        assertNotNull(e.kind());
      }
    });
    assertTrue(System.nanoTime() - start < 10_000_000_000L);
  }

  @Test
  void closingASubscriptionFromAnotherThreadEndsItsIteration() throws Exception {
    Subscription sub = client.subscribe("pulses", Query.of());
    Thread closer = new Thread(() -> {
      Publisher.awaitQuietly(300);
      sub.close();
    });
    closer.start();
    int events = 0;
    for (Event e : sub) events++;
    closer.join();
    assertTrue(events >= 1, "subscribed, then heartbeats");
    assertFalse(sub.hasNext());
  }
}
