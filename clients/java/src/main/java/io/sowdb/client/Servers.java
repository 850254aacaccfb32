package io.sowdb.client;

import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Server lists (SPEC §13, rule HA-5): where a call goes and what a failure means, the decisions
 * of the Python SDK's {@code sowdb_client.servers} (and the Node SDK's failover.ts) so that the
 * same call behaves the same in every SDK:
 *
 * <ul>
 *   <li>a write goes to the primary, and so does a read with {@code readFrom("primary")}; with
 *       {@code "any"} reads go to the servers in turn;
 *   <li>a replica's FAILED_PRECONDITION naming the primary (ErrorInfo metadata {@code primary})
 *       sends the call there at once; UNAVAILABLE or DEADLINE_EXCEEDED (a dead node, no primary
 *       elected yet) moves it to the next server, a round of them at most every {@link
 *       #ROUND_PAUSE}; anything else is the caller's error, thrown as it is;
 *   <li>past {@code failoverTimeout} of failing, an UNAVAILABLE ends the call.
 * </ul>
 *
 * A single address keeps none of this: its failures are thrown at once.
 */
final class Servers {
  /** Between two rounds over every server, so that a cluster electing is not hammered. */
  static final Duration ROUND_PAUSE = Duration.ofMillis(200);
  /** Call metadata of a read that must be served by the primary (a replica refuses it). */
  static final String READ_FROM_KEY = "sowdb-read-from";

  final List<String> addresses;
  final boolean readAny;
  final Duration failoverTimeout;
  volatile String primary;
  private final AtomicInteger turn = new AtomicInteger();
  private final Deque<long[]> freeSeqs = new ArrayDeque<>();
  private final Deque<String> freeIds = new ArrayDeque<>();

  Servers(String target, boolean readAny, Duration failoverTimeout) {
    List<String> found = new ArrayList<>();
    for (String p : target.split(",")) {
      String a = p.strip();
      if (a.isEmpty()) continue;
      int colon = a.lastIndexOf(':');
      if (colon <= 0 || colon == a.length() - 1) {
        throw new IllegalArgumentException("'" + a + "' is not HOST:PORT");
      }
      int port = Integer.parseInt(a.substring(colon + 1));
      if (port < 1 || port > 65535) throw new IllegalArgumentException("port out of range in '" + a + "'");
      found.add(a);
    }
    if (found.isEmpty()) {
      throw new IllegalArgumentException("'" + target + "' names no server (e.g. '127.0.0.1:9007' or 'h1:9007,h2:9007')");
    }
    this.addresses = List.copyOf(found);
    this.readAny = readAny;
    this.failoverTimeout = failoverTimeout;
    this.primary = addresses.size() == 1 ? addresses.get(0) : "";
  }

  boolean many() {
    return addresses.size() > 1;
  }

  Failover failover(boolean write) {
    return new Failover(write || !readAny);
  }

  /** A J-4 producer of this client's for one publish call at a time: {id, next seq}. */
  synchronized String[] takeProducer() {
    if (freeIds.isEmpty()) {
      return new String[] {"sdk-" + UUID.randomUUID().toString().replace("-", ""), "1"};
    }
    return new String[] {freeIds.pop(), Long.toString(freeSeqs.pop()[0])};
  }

  synchronized void giveBack(String id, long nextSeq) {
    freeIds.push(id);
    freeSeqs.push(new long[] {nextSeq});
  }

  static boolean isRedirect(SowdbException e) {
    String p = e.metadata().get("primary");
    return e.code() == Status.Code.FAILED_PRECONDITION && p != null && !p.isEmpty();
  }

  static boolean retryable(SowdbException e) {
    return e.code() == Status.Code.UNAVAILABLE || e.code() == Status.Code.DEADLINE_EXCEEDED;
  }

  /** One call's attempts: which server to try next, and whether to go on after a failure. */
  final class Failover {
    final boolean toPrimary;
    private long deadline;
    private int failures;
    private String redirected = "";
    private int next;

    Failover(boolean toPrimary) {
      this.toPrimary = toPrimary;
      this.next = toPrimary ? 0 : Math.floorMod(turn.getAndIncrement(), addresses.size());
    }

    /** The server to try now: the primary a replica named, else the primary known, else the next. */
    String address() {
      String chosen;
      if (!redirected.isEmpty()) {
        chosen = redirected;
        redirected = "";
      } else if (toPrimary && !primary.isEmpty()) {
        chosen = primary;
      } else {
        chosen = addresses.get(next % addresses.size());
      }
      int i = addresses.indexOf(chosen);
      if (i >= 0) next = i + 1;
      return chosen;
    }

    /** Whether to ask {@code address} its role before a call that must reach the primary. */
    boolean needsConfirm(String address) {
      return toPrimary && many() && !address.equals(primary);
    }

    /** The call got through: its next failure starts a new failover timeout. */
    void succeeded() {
      deadline = 0;
      failures = 0;
    }

    /**
     * Notes a failure at {@code address}; returns the milliseconds to wait before the next try.
     *
     * @throws SowdbException {@code e} itself when it is not a server's absence, or an
     *     UNAVAILABLE once the failover timeout has passed without a server taking the call
     */
    long failed(String address, SowdbException e) {
      long now = System.nanoTime();
      if (deadline == 0) deadline = now + failoverTimeout.toNanos();
      if (isRedirect(e)) {
        String named = e.metadata().get("primary");
        if (address.equals(primary)) primary = "";
        primary = named;
        redirected = named.equals(address) ? "" : named;
      } else if (retryable(e)) {
        if (address.equals(primary)) primary = "";
      } else {
        throw e;
      }
      if (now >= deadline) {
        throw SowdbException.of(Status.Code.UNAVAILABLE,
            "no server of " + String.join(",", addresses) + " took the call within "
                + failoverTimeout.toMillis() / 1000.0 + " s (failoverTimeout); last: " + e.getMessage(),
            List.of(), "", java.util.Map.of(), e);
      }
      failures++;
      long pause = failures % addresses.size() == 0 ? ROUND_PAUSE.toMillis() : 0;
      return Math.min(pause, Math.max(0, (deadline - now) / 1_000_000));
    }
  }

  static void sleep(long ms) {
    if (ms <= 0) return;
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw SowdbException.of(Status.Code.CANCELLED, "interrupted", List.of(), "", java.util.Map.of(), e);
    }
  }
}
