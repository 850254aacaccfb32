package io.sowdb.client;

import io.sowdb.v1.SowAndSubscribeRequest;
import io.sowdb.v1.SowRequest;
import io.sowdb.v1.SubscribeRequest;
import io.sowdb.v1.SubscriptionOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The options of a query and of a subscription, by the protocol's names (the shared cases'
 * {@code filter}, {@code order_by}, {@code top_n}, ...): {@code Query.of().filter("/qty > 10")
 * .orderBy("/qty DESC").topN(2)}. One class serves {@code sow}, {@code subscribe} and
 * {@code sowAndSubscribe}: each reads the options it has (a subscribe has no order), as the
 * Python SDK's keyword arguments and the Node SDK's option objects do.
 */
public final class Query {
  String filter = "";
  String orderBy = "";
  Integer topN;
  Integer skipN;
  Integer batchSize;
  String select = "";
  String bookmark = "";
  String subId = "";
  final List<String> grouping = new ArrayList<>();
  final List<String> projection = new ArrayList<>();
  final List<String> sowKeys = new ArrayList<>();
  boolean oof;
  boolean delta;
  Duration timeout;

  public static Query of() {
    return new Query();
  }

  /** A filter expression; empty matches every record. */
  public Query filter(String filter) {
    this.filter = filter;
    return this;
  }

  /** {@code "/qty DESC, /id"}. */
  public Query orderBy(String orderBy) {
    this.orderBy = orderBy;
    return this;
  }

  public Query topN(int n) {
    this.topN = n;
    return this;
  }

  public Query skipN(int n) {
    this.skipN = n;
    return this;
  }

  /** Records per response batch (the server's default when unset). */
  public Query batchSize(int n) {
    this.batchSize = n;
    return this;
  }

  /** A select list such as {@code "[-/,+/id,+/qty]"}. */
  public Query select(String select) {
    this.select = select;
    return this;
  }

  /** A historical query's point (H-1), or a subscription's replay start: a bookmark, a time such as {@code "20260102T150405Z"}, {@code "0"} or {@code "now"}. */
  public Query bookmark(String bookmark) {
    this.bookmark = bookmark;
    return this;
  }

  public Query bookmark(long bookmark) {
    return bookmark(Long.toUnsignedString(bookmark));
  }

  public Query grouping(String... paths) {
    grouping.addAll(List.of(paths));
    return this;
  }

  public Query projection(String... fields) {
    projection.addAll(List.of(fields));
    return this;
  }

  public Query sowKeys(String... keys) {
    sowKeys.addAll(List.of(keys));
    return this;
  }

  /** A subscription: send an oof when a record leaves the result set (O-1). */
  public Query oof(boolean oof) {
    this.oof = oof;
    return this;
  }

  /** A subscription: deliver the key and changed fields only (D-2). */
  public Query delta(boolean delta) {
    this.delta = delta;
    return this;
  }

  public Query subId(String subId) {
    this.subId = subId;
    return this;
  }

  /** The call's deadline: the whole query, or the whole subscription (which then ends with DEADLINE_EXCEEDED). */
  public Query timeout(Duration timeout) {
    this.timeout = timeout;
    return this;
  }

  SowRequest sowRequest(String topic) {
    SowRequest.Builder b =
        SowRequest.newBuilder()
            .setTopic(topic)
            .setFilter(filter)
            .setOrderBy(orderBy)
            .setSelect(select)
            .setBookmark(bookmark)
            .addAllGrouping(grouping)
            .addAllProjection(projection)
            .addAllSowKeys(sowKeys);
    if (topN != null) b.setTopN(topN);
    if (skipN != null) b.setSkipN(skipN);
    if (batchSize != null) b.setBatchSize(batchSize);
    return b.build();
  }

  SubscriptionOptions subscriptionOptions() {
    return SubscriptionOptions.newBuilder().setOof(oof).setDelta(delta).build();
  }

  SowAndSubscribeRequest sowAndSubscribeRequest(String topic) {
    return SowAndSubscribeRequest.newBuilder()
        .setQuery(sowRequest(topic))
        .setOptions(subscriptionOptions())
        .setSubId(subId)
        .build();
  }

  SubscribeRequest subscribeRequest(String topic) {
    return SubscribeRequest.newBuilder()
        .setTopic(topic)
        .setFilter(filter)
        .setBookmark(bookmark)
        .setOptions(subscriptionOptions())
        .setSubId(subId)
        .build();
  }
}
