package io.sowdb.client;

import io.sowdb.v1.OofReason;
import io.sowdb.v1.SowAndSubscribeResponse;
import io.sowdb.v1.SubscribeResponse;
import java.util.List;

/**
 * One event of a subscription stream, typed by {@link #kind()}: the kinds and fields of the
 * Python SDK's {@code Event} and the Node SDK's union ({@code group_begin}, {@code sow} records,
 * {@code group_end}, {@code publish}, {@code oof} with its {@link #reason()}, {@code deleted}, ...).
 *
 * @param kind what happened
 * @param records the records of SOW, PUBLISH, OOF and DELETED events (else empty)
 * @param reason for OOF: {@code deleted}, {@code expired} or {@code match} (else "")
 * @param subId the id of SUBSCRIBED
 * @param queryId the query id of GROUP_BEGIN and GROUP_END
 * @param bookmark the bookmark of SUBSCRIBED, GROUP_BEGIN, COMPLETED and HEARTBEAT
 * @param groupEnd the counts of GROUP_END (else null)
 */
public record Event(
    Kind kind,
    List<Record> records,
    String reason,
    String subId,
    String queryId,
    long bookmark,
    io.sowdb.v1.GroupEnd groupEnd) {

  /** The kinds of events. */
  public enum Kind {
    SUBSCRIBED,
    GROUP_BEGIN,
    /** The query's records (a SowAndSubscribe's {@code records}). */
    SOW,
    GROUP_END,
    /** Live (or replayed) records. */
    PUBLISH,
    OOF,
    DELETED,
    COMPLETED,
    HEARTBEAT,
    UNKNOWN
  }

  static Event of(Kind kind) {
    return new Event(kind, List.of(), "", "", "", 0, null);
  }

  Event withRecords(List<Record> rs) {
    return new Event(kind, rs, reason, subId, queryId, bookmark, groupEnd);
  }

  static List<Record> records(List<io.sowdb.v1.Record> rs) {
    return rs.stream().map(Record::of).toList();
  }

  static String reason(OofReason r) {
    return switch (r) {
      case OOF_REASON_DELETED -> "deleted";
      case OOF_REASON_EXPIRED -> "expired";
      case OOF_REASON_MATCH -> "match";
      default -> "";
    };
  }

  static Event of(SowAndSubscribeResponse r) {
    return switch (r.getEventCase()) {
      case SUBSCRIBED -> new Event(Kind.SUBSCRIBED, List.of(), "", r.getSubscribed().getSubId(), "",
          r.getSubscribed().getBookmark(), null);
      case GROUP_BEGIN -> new Event(Kind.GROUP_BEGIN, List.of(), "", "", r.getGroupBegin().getQueryId(),
          r.getGroupBegin().getBookmark(), null);
      case RECORDS -> of(Kind.SOW).withRecords(records(r.getRecords().getRecordsList()));
      case GROUP_END -> new Event(Kind.GROUP_END, List.of(), "", "", r.getGroupEnd().getQueryId(), 0, r.getGroupEnd());
      case PUBLISH -> of(Kind.PUBLISH).withRecords(records(r.getPublish().getRecordsList()));
      case OOF -> new Event(Kind.OOF, List.of(Record.of(r.getOof().getRecord())), reason(r.getOof().getReason()),
          "", "", 0, null);
      case COMPLETED -> new Event(Kind.COMPLETED, List.of(), "", "", "", r.getCompleted().getBookmark(), null);
      case HEARTBEAT -> new Event(Kind.HEARTBEAT, List.of(), "", "", "", r.getHeartbeat().getBookmark(), null);
      default -> of(Kind.UNKNOWN);
    };
  }

  static Event of(SubscribeResponse r) {
    return switch (r.getEventCase()) {
      case SUBSCRIBED -> new Event(Kind.SUBSCRIBED, List.of(), "", r.getSubscribed().getSubId(), "",
          r.getSubscribed().getBookmark(), null);
      case PUBLISH -> of(Kind.PUBLISH).withRecords(records(r.getPublish().getRecordsList()));
      case OOF -> new Event(Kind.OOF, List.of(Record.of(r.getOof().getRecord())), reason(r.getOof().getReason()),
          "", "", 0, null);
      case DELETED -> of(Kind.DELETED).withRecords(records(r.getDeleted().getRecordsList()));
      case COMPLETED -> new Event(Kind.COMPLETED, List.of(), "", "", "", r.getCompleted().getBookmark(), null);
      case HEARTBEAT -> new Event(Kind.HEARTBEAT, List.of(), "", "", "", r.getHeartbeat().getBookmark(), null);
      default -> of(Kind.UNKNOWN);
    };
  }
}
