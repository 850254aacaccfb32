package io.sowdb.client;

import io.grpc.Context;
import io.grpc.Status;
import io.sowdb.v1.SubscribeRequest;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.function.Function;

/**
 * A subscription's events as a blocking iterator ({@code for (Event e : sub)}), ended by {@link
 * #close()} (from any thread: it cancels the call, and the iteration ends) or by the call's
 * deadline or failure, thrown as a {@link SowdbException} from {@code hasNext}.
 *
 * <p>Over a server list, a {@code subscribe} resumes by itself when its server fails (HA-5): from
 * the last bookmark it delivered, on a node that has applied it, with no gap and no duplicate
 * (records at or before that bookmark are dropped; the new stream's own {@code subscribed} is
 * not shown again), as the Python SDK's {@code Resume} does. It asks from one bookmark earlier,
 * and the first record must be the last one delivered (same bookmark and timestamp): after an
 * {@code async} failover the new primary may hold its own writes at bookmarks the dead one had
 * shown, and going on after the old bookmark would skip them silently. Such a subscription ends
 * with {@code DATA_LOSS}, reason {@code SUBSCRIPTION_FORKED}, as in every SDK.
 */
public final class Subscription implements Iterator<Event>, Iterable<Event>, AutoCloseable {
  /** An open call: its events and the context whose cancellation ends it. */
  record Opened(Iterator<Event> events, Context.CancellableContext context, String address) {}

  /** Opens the call again after {@code error} (null: the first time); {@code progressed}: the last one delivered something. */
  interface Opener {
    Opened open(SowdbException error, boolean progressed);
  }

  private final Opener opener;
  private final Resume resume;
  private final boolean reopens;
  private Opened current;
  private Event pending;
  private volatile boolean closed;
  private boolean progressed;
  private boolean ended;

  Subscription(Opener opener, Resume resume, boolean reopens) {
    this.opener = opener;
    this.resume = resume;
    this.reopens = reopens;
  }

  static <R> Iterator<Event> mapped(Iterator<R> responses, Function<R, Event> convert) {
    return new Iterator<>() {
      public boolean hasNext() {
        return responses.hasNext();
      }

      public Event next() {
        return convert.apply(responses.next());
      }
    };
  }

  @Override
  public Iterator<Event> iterator() {
    return this;
  }

  @Override
  public boolean hasNext() {
    while (pending == null) {
      if (closed || ended) return false;
      SowdbException error = null;
      try {
        if (current == null) {
          current = opener.open(null, false);
        }
        if (!current.events().hasNext()) {
          ended = true;
          return false;
        }
        Event e = current.events().next();
        pending = resume == null ? e : resume.admit(e, current.address());
        if (pending != null) progressed = true;
      } catch (RuntimeException ex) {
        if (closed) return false;
        error = SowdbException.from(ex);
      }
      if (error != null) {
        if (current != null) current.context().cancel(null);
        if (!reopens || FORKED.equals(error.reason())) {
          ended = true;
          throw error;
        }
        SowdbException judged = resume == null ? error : resume.judged(error);
        current = opener.open(judged, progressed);
        progressed = false;
      }
    }
    return true;
  }

  @Override
  public Event next() {
    if (!hasNext()) throw new NoSuchElementException();
    Event e = pending;
    pending = null;
    return e;
  }

  /** Ends the subscription (cancels its call); safe from any thread, and more than once. */
  @Override
  public void close() {
    closed = true;
    Opened c = current;
    if (c != null) c.context().cancel(null);
  }

  /** The reason of the error that ends a subscription resumed on another history. */
  static final String FORKED = "SUBSCRIPTION_FORKED";

  /** What a subscription delivered, to resume it elsewhere with no gap and no duplicate. */
  static final class Resume {
    final SubscribeRequest request;
    final boolean deadline;
    long bookmark;
    private long delivered; // the bookmark of the last record delivered (0: none yet)
    private java.time.Instant deliveredAt; // and its timestamp
    private boolean verify; // the resumed stream's first record must be that one again
    private boolean resumed;
    private boolean subscribed;
    private boolean completed;

    Resume(SubscribeRequest request, boolean deadline) {
      this.request = request;
      this.deadline = deadline;
      this.completed = request.getBookmark().isEmpty();
    }

    /** The request of the next attempt: from the resume point once there is one. */
    SubscribeRequest resumedRequest() {
      if (!subscribed) return request;
      resumed = true;
      verify = delivered != 0 && delivered == bookmark;
      long from = verify ? bookmark - 1 : bookmark;
      return request.toBuilder().setBookmark(Long.toUnsignedString(from)).build();
    }

    /** A node that refuses the resume point as "after the latest" is behind: try another. */
    SowdbException judged(SowdbException e) {
      if (deadline && e.code() == Status.Code.DEADLINE_EXCEEDED) throw e;
      if (resumed && e.code() == Status.Code.INVALID_ARGUMENT && "bookmark".equals(e.field())) {
        return SowdbException.of(Status.Code.UNAVAILABLE, "behind: " + e.serverMessage(), List.of(), "", Map.of(), e);
      }
      return e;
    }

    Event admit(Event e, String address) {
      switch (e.kind()) {
        case SUBSCRIBED -> {
          if (!subscribed) {
            subscribed = true;
            bookmark = e.bookmark();
            return e;
          }
          if (Long.compareUnsigned(e.bookmark(), bookmark) < 0) {
            throw SowdbException.of(Status.Code.UNAVAILABLE,
                address + " has applied bookmark " + e.bookmark() + ", before " + bookmark, List.of(), "", Map.of(), null);
          }
          return null;
        }
        case COMPLETED -> {
          if (completed) return null;
          completed = true;
          return e;
        }
        default -> {}
      }
      boolean records = e.kind() == Event.Kind.PUBLISH || e.kind() == Event.Kind.DELETED || e.kind() == Event.Kind.OOF;
      if (records && verify) {
        verify = false;
        Record again = e.records().isEmpty() ? null : e.records().get(0);
        if (again == null || again.bookmark() != bookmark || !again.timestamp().equals(deliveredAt)) {
          throw SowdbException.of(Status.Code.DATA_LOSS,
              "this subscription delivered bookmark " + Long.toUnsignedString(bookmark) + " from a node that then "
                  + "failed, and the cluster holds another entry there ("
                  + (again == null ? "none" : "bookmark " + Long.toUnsignedString(again.bookmark()))
                  + " comes first): what it delivered last was never replicated nor acknowledged to its publisher; "
                  + "subscribe again for the cluster's state",
              List.of(), FORKED, Map.of(), null);
        }
      }
      if (resumed && records) {
        List<Record> kept = e.records().stream().filter(r -> Long.compareUnsigned(r.bookmark(), bookmark) > 0).toList();
        if (kept.isEmpty()) return null;
        e = e.withRecords(kept);
      }
      if (e.kind() == Event.Kind.PUBLISH || e.kind() == Event.Kind.DELETED) {
        for (Record r : e.records()) {
          if (Long.compareUnsigned(r.bookmark(), bookmark) >= 0) { // (the placement point may be a record's)
            bookmark = r.bookmark();
            delivered = r.bookmark();
            deliveredAt = r.timestamp();
          }
        }
      }
      return e;
    }
  }
}
