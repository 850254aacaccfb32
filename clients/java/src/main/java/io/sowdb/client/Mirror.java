package io.sowdb.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A local copy of a subscription's result set, kept exact by applying every event of a
 * {@code sowAndSubscribe}: the query's records, live publishes, oofs and deletes (with
 * {@code delta}, a publish is merged into the record held). Keyed by (topic, SowKey), because a
 * regex subscription covers topics whose SowKeys may be the same. As the Python and Node SDKs'
 * {@code Mirror}; not thread-safe (one subscription's events are applied on one thread).
 */
public final class Mirror {
  /** The key of a record: its topic and SowKey. */
  public record Key(String topic, String sowKey) {}

  private final Map<Key, Record> records = new LinkedHashMap<>();
  private final boolean delta;
  private boolean ready;
  private long bookmark;

  public Mirror() {
    this(false);
  }

  /** {@code delta}: the subscription sends delta publishes, to merge into what is held. */
  public Mirror(boolean delta) {
    this.delta = delta;
  }

  public void apply(Event event) {
    switch (event.kind()) {
      case SOW -> put(event.records(), false);
      case PUBLISH -> put(event.records(), delta);
      case OOF, DELETED -> event.records().forEach(r -> records.remove(new Key(r.topic(), r.sowKey())));
      case GROUP_END -> ready = true;
      default -> {}
    }
    for (Record r : event.records()) {
      bookmark = Math.max(bookmark, r.bookmark());
    }
  }

  /** Whether the query's results are all in (its group_end was applied). */
  public boolean ready() {
    return ready;
  }

  /** The highest bookmark applied. */
  public long bookmark() {
    return bookmark;
  }

  public int size() {
    return records.size();
  }

  public Record get(String topic, String sowKey) {
    return records.get(new Key(topic, sowKey));
  }

  /** The records held, by key. */
  public Map<Key, Record> records() {
    return java.util.Collections.unmodifiableMap(records);
  }

  /** The documents held, parsed. */
  public List<Map<String, Object>> values() {
    List<Map<String, Object>> out = new ArrayList<>(records.size());
    for (Record r : records.values()) out.add(r.map());
    return out;
  }

  private void put(List<Record> rs, boolean merge) {
    for (Record r : rs) {
      Key key = new Key(r.topic(), r.sowKey());
      Record held = records.get(key);
      if (merge && held != null) {
        JsonNode doc = held.json();
        if (doc instanceof ObjectNode o && r.json() instanceof ObjectNode d) {
          merge(o, d);
          r = new Record(r.topic(), r.sowKey(), r.bookmark(), r.timestamp(), Json.encode(o));
        }
      }
      records.put(key, r);
    }
  }

  private static void merge(ObjectNode into, ObjectNode delta) {
    delta.fields().forEachRemaining(e -> {
      JsonNode held = into.get(e.getKey());
      if (held instanceof ObjectNode h && e.getValue() instanceof ObjectNode v) {
        merge(h, v);
      } else {
        into.set(e.getKey(), e.getValue());
      }
    });
  }
}
