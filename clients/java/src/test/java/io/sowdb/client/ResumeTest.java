package io.sowdb.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.grpc.Status;
import io.sowdb.v1.SubscribeRequest;
import java.time.Instant;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A subscription resumed on another node (HA-5), as the shared rule of every SDK says: from one
 * bookmark earlier, its last record must come again, else DATA_LOSS SUBSCRIPTION_FORKED (an
 * async primary showed what no replica had, and the new one wrote its own at those bookmarks).
 */
class ResumeTest {
  private static Record record(long bookmark, long micros) {
    return new Record("t", Long.toString(bookmark), bookmark, Instant.ofEpochSecond(0, micros * 1000), new byte[0]);
  }

  private static Event event(Event.Kind kind, long bookmark, Record... records) {
    return new Event(kind, List.of(records), "", "", "", bookmark, null);
  }

  @Test
  void theSameRecordAgainGoesOnAfterIt() {
    Subscription.Resume resume = new Subscription.Resume(SubscribeRequest.newBuilder().setTopic("t").build(), false);
    resume.admit(event(Event.Kind.SUBSCRIBED, 5), "a");
    resume.admit(event(Event.Kind.PUBLISH, 0, record(6, 100), record(7, 100)), "a");
    assertEquals("6", resume.resumedRequest().getBookmark());
    resume.admit(event(Event.Kind.SUBSCRIBED, 9), "b");
    Event shown = resume.admit(event(Event.Kind.PUBLISH, 0, record(7, 100), record(8, 250)), "b");
    assertNotNull(shown);
    assertEquals(List.of(8L), shown.records().stream().map(Record::bookmark).toList());
  }

  @Test
  void anotherRecordThereEndsItWithDataLoss() {
    Subscription.Resume resume = new Subscription.Resume(SubscribeRequest.newBuilder().setTopic("t").build(), false);
    resume.admit(event(Event.Kind.SUBSCRIBED, 5), "a");
    resume.admit(event(Event.Kind.PUBLISH, 0, record(6, 100), record(7, 100)), "a");
    resume.resumedRequest();
    resume.admit(event(Event.Kind.SUBSCRIBED, 9), "b");
    SowdbException e = assertThrows(SowdbException.class,
        () -> resume.admit(event(Event.Kind.PUBLISH, 0, record(7, 250), record(8, 250)), "b"));
    assertEquals(Status.Code.DATA_LOSS, e.code());
    assertEquals("SUBSCRIPTION_FORKED", e.reason());
  }
}
