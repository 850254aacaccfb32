package io.sowdb.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.util.Map;

/**
 * One stored message as the server sends it: its topic, SowKey, bookmark (the journal sequence
 * number of the change, an unsigned 64-bit value held in a long), publish time and JSON data.
 * The data stays bytes until asked for, so that a caller that only counts or forwards records
 * pays no parse.
 */
public record Record(String topic, String sowKey, long bookmark, Instant timestamp, byte[] data) {

  static Record of(io.sowdb.v1.Record r) {
    var ts = r.getTimestamp();
    return new Record(
        r.getTopic(),
        r.getSowKey(),
        r.getBookmark(),
        Instant.ofEpochSecond(ts.getSeconds(), ts.getNanos()),
        r.getData().toByteArray());
  }

  /** The document as a JSON tree. */
  public JsonNode json() {
    return Json.tree(data);
  }

  /** The document as a plain map (what the Python SDK's {@code Record.json()} gives). */
  public Map<String, Object> map() {
    return Json.map(data);
  }

  /** The document mapped onto a class of the caller's (Jackson databinding). */
  public <T> T as(Class<T> type) {
    try {
      return Json.MAPPER.readValue(data, type);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public String toString() {
    return topic + "/" + sowKey + "@" + bookmark + " " + new String(data, java.nio.charset.StandardCharsets.UTF_8);
  }
}
