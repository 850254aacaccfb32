package io.sowdb.client;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.sowdb.v1.PublishMessage;
import io.sowdb.v1.PublishRequest;
import io.sowdb.v1.PublishResponse;
import io.sowdb.v1.SowServiceGrpc;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * One publish call: documents grouped into atomic requests (by count, {@code batchSize}, and by
 * bytes, under the client's message limit) sent over one Publish stream with up to {@link
 * #WINDOW} requests unanswered, each with {@code stop_on_error} (the server applies nothing
 * after the first refused request). Requests sent but not yet acknowledged are kept (the
 * Python SDK's {@code Outbox}): after a failover, a new attempt on the new primary sends exactly
 * those again, with the same J-4 producer id and sequence, so what the old primary had applied is
 * acknowledged as a duplicate instead of applied twice.
 */
final class Publisher {
  /** Requests in flight on one stream: enough to keep the server busy, bounded in memory. */
  static final int WINDOW = 64;
  /** Bytes of a request's limit kept for what is not a message (topic, ids, framing). */
  static final int REQUEST_HEADROOM = 4096;
  /** Bytes of a message's framing inside a request. */
  static final int MESSAGE_FRAMING = 16;

  private final String topic;
  private final Iterator<?> docs;
  private final PublishOptions options;
  private final int room;
  private final Deque<PublishRequest> unacked = new ArrayDeque<>();
  private final List<Integer> sizes = new ArrayList<>();
  private PublishMessage carried;
  private int made;
  private int acked;
  private long stored;
  private long duplicates;
  private long first;
  private long last;

  Publisher(String topic, Iterable<?> docs, PublishOptions options, int maxMessageBytes) {
    this.topic = topic;
    this.docs = docs.iterator();
    this.options = options;
    this.room = maxMessageBytes - REQUEST_HEADROOM - topic.length() * 4 - options.producerId.length() * 4;
  }

  /** The next request drawn from the documents, or null when they are all drawn. */
  private PublishRequest nextRequest() {
    if (carried == null && !docs.hasNext()) return null;
    PublishRequest.Builder b = PublishRequest.newBuilder()
        .setTopic(topic)
        .setDelta(options.delta)
        .setCorrelationId(Integer.toString(made))
        .setStopOnError(true);
    if (!options.producerId.isEmpty()) {
      b.setProducerId(options.producerId).setProducerSeq(options.producerSeq + made);
    }
    long used = 0;
    while (b.getMessagesCount() < options.batchSize && (carried != null || docs.hasNext())) {
      PublishMessage msg = carried != null ? carried : message(docs.next());
      carried = null;
      int size = msg.getSerializedSize() + MESSAGE_FRAMING;
      if (b.getMessagesCount() > 0 && used + size > room) {
        carried = msg; // the next request's first (a message over the limit alone goes alone, refused)
        break;
      }
      b.addMessages(msg);
      used += size;
    }
    made++;
    sizes.add(b.getMessagesCount());
    return b.build();
  }

  private static PublishMessage message(Object doc) {
    return PublishMessage.newBuilder().setData(ByteString.copyFrom(Json.encode(doc))).build();
  }

  /** The requests this call made (for the producer's next sequence). */
  int requestsMade() {
    return made;
  }

  PublishAck total() {
    return new PublishAck(stored, first, last, duplicates);
  }

  /**
   * One attempt on {@code stub}: sends the unacknowledged requests again, then the rest.
   *
   * @throws PublishException a request was refused
   * @throws SowdbException the stream failed (the caller may try again elsewhere)
   */
  PublishAck attempt(SowServiceGrpc.SowServiceStub stub, Runnable onAck) {
    LinkedBlockingQueue<Object> answers = new LinkedBlockingQueue<>();
    Object done = new Object();
    ClientCallStreamObserver<PublishRequest>[] out = new ClientCallStreamObserver[1];
    stub.publish(new ClientResponseObserver<PublishRequest, PublishResponse>() {
      public void beforeStart(ClientCallStreamObserver<PublishRequest> r) {
        out[0] = r;
      }

      public void onNext(PublishResponse value) {
        answers.add(value);
      }

      public void onError(Throwable t) {
        answers.add(t);
      }

      public void onCompleted() {
        answers.add(done);
      }
    });
    ClientCallStreamObserver<PublishRequest> requests = out[0];
    int inFlight = 0;
    boolean ended = false;
    try {
      for (PublishRequest r : unacked) {
        requests.onNext(r);
        inFlight++;
      }
      while (true) {
        while (inFlight < WINDOW && !ended) {
          PublishRequest r = nextRequest();
          if (r == null) {
            ended = true;
            requests.onCompleted();
            break;
          }
          unacked.add(r);
          requests.onNext(r);
          inFlight++;
        }
        Object a = answers.take();
        while (true) { // every answer already here, before sending more: one wake-up for many
          if (a == done) {
            if (inFlight > 0 || !ended) {
              throw SowdbException.of(Status.Code.UNAVAILABLE,
                  "the publish stream ended before every request was answered", List.of(), "", Map.of(), null);
            }
            return total();
          }
          if (a instanceof Throwable t) throw SowdbException.from(t);
          ack((PublishResponse) a);
          onAck.run();
          inFlight--;
          a = answers.poll();
          if (a == null) break;
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      requests.cancel("interrupted", e);
      throw SowdbException.of(Status.Code.CANCELLED, "interrupted", List.of(), "", Map.of(), e);
    } catch (RuntimeException e) {
      requests.cancel("publish ended", null);
      throw e;
    }
  }

  private void ack(PublishResponse r) {
    if (r.hasError()) {
      SowdbException base = SowdbException.fromStatus(r.getError());
      String index = base.metadata().get("message_index");
      int offset = 0;
      for (int i = 0; i < acked; i++) offset += sizes.get(i);
      throw new PublishException(base, index == null ? null : offset + Integer.parseInt(index), total());
    }
    unacked.poll();
    int size = sizes.get(acked++);
    stored += size;
    if (r.getDuplicate()) {
      duplicates += size;
      return;
    }
    if (first == 0) first = r.getFirstBookmark();
    last = r.getLastBookmark();
  }

  static void awaitQuietly(long ms) {
    try {
      TimeUnit.MILLISECONDS.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
