package io.sowdb.client;

import io.grpc.Context;
import io.sowdb.v1.GroupEnd;
import io.sowdb.v1.SowResponse;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

/**
 * A query's records as they arrive (an iterator over the Sow stream's batches), and its
 * {@code group_end} counts once read to the end. {@link #close()} cancels a query not read to the
 * end; a failure of the stream is thrown as a {@link SowdbException}.
 */
public final class SowResult implements Iterable<Record>, Iterator<Record>, AutoCloseable {
  private final Iterator<SowResponse> responses;
  private final Context.CancellableContext context;
  private final Deque<Record> batch = new ArrayDeque<>();
  private GroupEnd groupEnd;

  SowResult(Iterator<SowResponse> responses, Context.CancellableContext context) {
    this.responses = responses;
    this.context = context;
  }

  @Override
  public Iterator<Record> iterator() {
    return this;
  }

  @Override
  public boolean hasNext() {
    try {
      while (batch.isEmpty()) {
        if (!responses.hasNext()) {
          context.cancel(null);
          return false;
        }
        SowResponse r = responses.next();
        switch (r.getEventCase()) {
          case RECORDS -> r.getRecords().getRecordsList().forEach(x -> batch.add(Record.of(x)));
          case GROUP_END -> groupEnd = r.getGroupEnd();
          default -> {}
        }
      }
      return true;
    } catch (RuntimeException e) {
      context.cancel(null);
      throw SowdbException.from(e);
    }
  }

  @Override
  public Record next() {
    if (!hasNext()) throw new NoSuchElementException();
    return batch.poll();
  }

  /** Every (remaining) record, read to the end. */
  public List<Record> toList() {
    List<Record> out = new ArrayList<>();
    while (hasNext()) out.add(batch.poll());
    return out;
  }

  /** The counts of the query (returned, matched, scanned) once read to the end, else null. */
  public GroupEnd groupEnd() {
    return groupEnd;
  }

  @Override
  public void close() {
    context.cancel(null);
  }
}
