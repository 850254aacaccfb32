package io.sowdb.bench;

import io.sowdb.client.PublishAck;
import io.sowdb.client.PublishOptions;
import io.sowdb.client.Query;
import io.sowdb.client.Record;
import io.sowdb.client.SowResult;
import io.sowdb.client.SowdbClient;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One benchmark round of the Java SDK, driven by {@code tools/bench/bench_sdks.py} beside the
 * Python SDK's round (and the Go SDK's {@code sowdb-bench}, which takes the same arguments):
 *
 * <pre>
 * --address HOST:PORT --mode sow|publish --count N [--topic orders]
 * </pre>
 *
 * {@code sow}: queries the topic (batch_size 100) and receives every record as an object (its JSON
 * parsed into a Map, a field read); {@code publish}: publishes N orders {@code {"orderId": i,
 * "symbol": "SYM<i%100>", "price": ..., "qty": ...}}, made before the clock starts, 100 per
 * request. Prints one JSON line: {@code {"sdk": "java", "mode": ..., "count": N, "seconds": S}}.
 */
public final class SowdbBench {
  private SowdbBench() {}

  public static void main(String[] args) {
    Map<String, String> opts = new LinkedHashMap<>(Map.of("--topic", "orders"));
    for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i], args[i + 1]);
    String address = required(opts, "--address");
    String mode = required(opts, "--mode");
    int count = Integer.parseInt(required(opts, "--count"));
    String topic = opts.get("--topic");
    try (SowdbClient client = SowdbClient.connect(address)) {
      client.listTopics(); // connected before the clock starts
      long received;
      double seconds;
      if (mode.equals("sow")) {
        long start = System.nanoTime();
        long check = 0;
        received = 0;
        try (SowResult result = client.sow(topic, Query.of().batchSize(100))) {
          for (Record r : result) {
            Object qty = r.map().get("qty"); // the document is parsed: read a field of it
            if (qty instanceof Number n) check += n.longValue();
            received++;
          }
        }
        seconds = (System.nanoTime() - start) / 1e9;
        if (check < 0) System.err.println(check);
      } else if (mode.equals("publish")) {
        List<Map<String, Object>> docs = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
          Map<String, Object> d = new LinkedHashMap<>();
          d.put("orderId", i);
          d.put("symbol", "SYM" + (i % 100));
          d.put("price", 100.0 + (i % 1000) / 10.0);
          d.put("qty", 1 + i % 50);
          docs.add(d);
        }
        long start = System.nanoTime();
        PublishAck ack = client.publish(topic, docs, PublishOptions.of().batchSize(100));
        seconds = (System.nanoTime() - start) / 1e9;
        received = ack.count();
      } else {
        throw new IllegalArgumentException("--mode must be sow or publish, got " + mode);
      }
      System.out.printf("{\"sdk\": \"java\", \"mode\": \"%s\", \"count\": %d, \"seconds\": %.6f}%n", mode, received, seconds);
    }
  }

  private static String required(Map<String, String> opts, String name) {
    String v = opts.get(name);
    if (v == null) {
      System.err.println("usage: SowdbBench --address HOST:PORT --mode sow|publish --count N [--topic orders]");
      System.exit(2);
    }
    return v;
  }
}
