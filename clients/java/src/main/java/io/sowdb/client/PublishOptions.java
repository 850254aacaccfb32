package io.sowdb.client;

import java.time.Duration;

/**
 * The options of a publish: messages per atomic request ({@code batchSize}, default 100, as in
 * the Python and Node SDKs; a request is also kept under the client's message limit in bytes),
 * a J-4 producer id and its first sequence (request n of the call carries {@code producerSeq + n},
 * so that a request sent again is applied once), delta publishes (D-1) and a deadline.
 */
public final class PublishOptions {
  /** The default messages per request. */
  public static final int DEFAULT_BATCH = 100;

  int batchSize = DEFAULT_BATCH;
  String producerId = "";
  long producerSeq = 1;
  boolean delta;
  Duration timeout;

  public static PublishOptions of() {
    return new PublishOptions();
  }

  public PublishOptions batchSize(int n) {
    if (n < 1) throw new IllegalArgumentException("batchSize must be at least 1, got " + n);
    this.batchSize = n;
    return this;
  }

  public PublishOptions producerId(String id) {
    this.producerId = id;
    return this;
  }

  public PublishOptions producerSeq(long seq) {
    if (seq < 0) throw new IllegalArgumentException("producerSeq must be at least 0, got " + seq);
    this.producerSeq = seq;
    return this;
  }

  public PublishOptions delta(boolean delta) {
    this.delta = delta;
    return this;
  }

  public PublishOptions timeout(Duration timeout) {
    this.timeout = timeout;
    return this;
  }

  PublishOptions copy() {
    PublishOptions c = new PublishOptions();
    c.batchSize = batchSize;
    c.producerId = producerId;
    c.producerSeq = producerSeq;
    c.delta = delta;
    c.timeout = timeout;
    return c;
  }
}
