package io.sowdb.client;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.util.Iterator;
import java.util.NoSuchElementException;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * A server stream read as a blocking iterator that asks for {@link #WINDOW} messages ahead.
 *
 * <p>grpc-java's blocking stub asks for one message at a time: each message then costs a hop to
 * the transport's thread and back, and on a busy machine each hop waits for the scheduler (a
 * 100k-record query measured 5 to 10 s that way, against 1.8 s for the Python SDK). Here the
 * transport delivers up to a window of messages into a queue while the caller reads, and more are
 * asked for each time half the window is consumed: memory stays bounded (a window of batches),
 * and a reader that keeps up never waits on a hop. A failure is rethrown as the transport gave
 * it (its status and trailers, so that {@link SowdbException#from} reads the rich details).
 */
final class Prefetch<Q, R> implements Iterator<R>, ClientResponseObserver<Q, R> {
  static final int WINDOW = 32;
  private static final Object END = new Object();

  private final LinkedBlockingQueue<Object> queue = new LinkedBlockingQueue<>();
  private volatile ClientCallStreamObserver<Q> call;
  private Object peeked;
  private int consumed;

  @Override
  public void beforeStart(ClientCallStreamObserver<Q> requestStream) {
    this.call = requestStream;
    requestStream.disableAutoRequestWithInitial(WINDOW);
  }

  @Override
  public void onNext(R value) {
    queue.add(value);
  }

  @Override
  public void onError(Throwable t) {
    queue.add(new Failure(t));
  }

  @Override
  public void onCompleted() {
    queue.add(END);
  }

  private record Failure(Throwable error) {}

  @Override
  public boolean hasNext() {
    if (peeked == null) {
      try {
        peeked = queue.take();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        call.cancel("interrupted", e);
        throw Status.CANCELLED.withDescription("interrupted").withCause(e).asRuntimeException();
      }
    }
    if (peeked instanceof Failure f) {
      if (f.error() instanceof RuntimeException re) throw re;
      throw Status.fromThrowable(f.error()).asRuntimeException(Status.trailersFromThrowable(f.error()));
    }
    return peeked != END;
  }

  @SuppressWarnings("unchecked")
  @Override
  public R next() {
    if (!hasNext()) throw new NoSuchElementException();
    R value = (R) peeked;
    peeked = null;
    if (++consumed == WINDOW / 2) {
      consumed = 0;
      call.request(WINDOW / 2);
    }
    return value;
  }
}
