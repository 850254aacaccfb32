package io.sowdb.client;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * The SDK's one JSON codec (Jackson): documents go out as UTF-8 JSON bytes and come back as
 * trees ({@link JsonNode}) or plain maps, the shapes the other SDKs give ({@code dict}, object).
 */
public final class Json {
  /** Shared and thread-safe once configured; callers may use it to map records to their classes. */
  public static final ObjectMapper MAPPER = new ObjectMapper();

  private Json() {}

  /**
   * A document as the JSON bytes of a PublishMessage: {@code byte[]} and {@link String} are taken
   * as JSON text already, anything else (a Map, a JsonNode, a bean) is encoded.
   */
  public static byte[] encode(Object doc) {
    if (doc instanceof byte[] b) {
      return b;
    }
    if (doc instanceof String s) {
      return s.getBytes(StandardCharsets.UTF_8);
    }
    try {
      return MAPPER.writeValueAsBytes(doc);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("cannot encode document as JSON: " + e.getMessage(), e);
    }
  }

  /** JSON bytes as a tree. */
  public static JsonNode tree(byte[] data) {
    try {
      return MAPPER.readTree(data);
    } catch (IOException e) {
      throw new UncheckedIOException("a record's data is not JSON", e);
    }
  }

  /** JSON bytes as a plain map (objects as LinkedHashMap, numbers as Integer/Long/Double). */
  @SuppressWarnings("unchecked")
  public static Map<String, Object> map(byte[] data) {
    try {
      return MAPPER.readValue(data, Map.class);
    } catch (IOException e) {
      throw new UncheckedIOException("a record's data is not a JSON object", e);
    }
  }
}
