package io.sowdb.client;

import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptor;
import io.grpc.Context;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.AbstractStub;
import io.grpc.stub.MetadataUtils;
import io.sowdb.v1.AdminServiceGrpc;
import io.sowdb.v1.ClusterNode;
import io.sowdb.v1.ClusterStatusRequest;
import io.sowdb.v1.ListTopicsRequest;
import io.sowdb.v1.SowAndSubscribeRequest;
import io.sowdb.v1.SowAndSubscribeResponse;
import io.sowdb.v1.SowDeleteRequest;
import io.sowdb.v1.SowRequest;
import io.sowdb.v1.SowResponse;
import io.sowdb.v1.SubscribeRequest;
import io.sowdb.v1.SubscribeResponse;
import io.sowdb.v1.SowServiceGrpc;
import io.sowdb.v1.TopicInfo;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * A connection to a sowdb server, or to a cluster's servers: the Java SDK's one entry point, in
 * the Python SDK's shape ({@code publish}, {@code sow}, {@code subscribe}, {@code
 * sowAndSubscribe}, {@code sowDelete}, ...).
 *
 * <pre>{@code
 * try (SowdbClient client = SowdbClient.connect("127.0.0.1:9007")) {
 *   client.publish("orders", List.of(Map.of("orderId", 1, "symbol", "SYM1")));
 *   for (Record r : client.sow("orders", Query.of().filter("/symbol = 'SYM1'"))) System.out.println(r.map());
 * }
 * }</pre>
 *
 * Given several servers ({@code "h1:9007,h2:9007,h3:9007"}, rule HA-5), writes go to the primary,
 * found again after a failover for up to {@code failoverTimeout}; a publish carries a J-4
 * producer id (this client's, when the call names none) so a request sent again is applied once;
 * reads go to the primary, or with {@code readFrom("any")} to each server in turn; a {@code
 * subscribe} resumes on another server from the last bookmark it delivered. Thread-safe.
 */
public final class SowdbClient implements AutoCloseable {
  /** Seconds a probe of a server's role may take (a blackholed node answers nothing). */
  static final long PROBE_TIMEOUT_MS = 2000;

  private final Servers servers;
  private final Builder options;
  private final Map<String, ManagedChannel> channels = new ConcurrentHashMap<>();
  private final Metadata headers = new Metadata();

  /** TLS options: a CA file to trust (null: the system's), and for mutual TLS a client certificate and key. */
  public record Tls(File ca, File cert, File key, String serverName) {
    public static Tls system() {
      return new Tls(null, null, null, null);
    }

    public static Tls ca(File ca) {
      return new Tls(ca, null, null, null);
    }
  }

  /** The options of a client; {@link #build()} connects (lazily: the first call dials). */
  public static final class Builder {
    String address = "127.0.0.1:9007";
    String token;
    Tls tls;
    boolean readAny;
    Duration failoverTimeout = Duration.ofSeconds(30);
    Duration keepalive = Duration.ofSeconds(5);
    int maxMessageBytes = 16 * 1024 * 1024;

    /** {@code host:port}, or a cluster's servers separated by commas. */
    public Builder address(String address) {
      this.address = address;
      return this;
    }

    public Builder servers(List<String> servers) {
      this.address = String.join(",", servers);
      return this;
    }

    /** Sent with every call as {@code authorization: Bearer TOKEN}. */
    public Builder token(String token) {
      this.token = token;
      return this;
    }

    public Builder tls(Tls tls) {
      this.tls = tls;
      return this;
    }

    /** {@code "primary"} (default) or {@code "any"}: where queries and subscriptions go in a cluster. */
    public Builder readFrom(String readFrom) {
      if (!readFrom.equals("primary") && !readFrom.equals("any")) {
        throw new IllegalArgumentException("readFrom must be 'primary' or 'any', got '" + readFrom + "'");
      }
      this.readAny = readFrom.equals("any");
      return this;
    }

    /** How long a call looks for a server again after a failover (default 30 s). */
    public Builder failoverTimeout(Duration d) {
      this.failoverTimeout = d;
      return this;
    }

    /** HTTP/2 pings on a connection with open calls (default 5 s); an unanswered one ends it. */
    public Builder keepalive(Duration d) {
      this.keepalive = d;
      return this;
    }

    public Builder maxMessageBytes(int n) {
      this.maxMessageBytes = n;
      return this;
    }

    public SowdbClient build() {
      return new SowdbClient(this);
    }
  }

  public static Builder builder() {
    return new Builder();
  }

  /** A client of {@code address} ({@code host:port} or a comma-separated server list) with the defaults. */
  public static SowdbClient connect(String address) {
    return builder().address(address).build();
  }

  private SowdbClient(Builder b) {
    this.options = b;
    this.servers = new Servers(b.address, b.readAny, b.failoverTimeout);
    if (b.token != null && !b.token.isEmpty()) {
      headers.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + b.token);
    }
  }

  private ManagedChannel channel(String address) {
    return channels.computeIfAbsent(address, a -> {
      ChannelCredentials creds = InsecureChannelCredentials.create();
      if (options.tls != null) {
        try {
          TlsChannelCredentials.Builder t = TlsChannelCredentials.newBuilder();
          if (options.tls.ca() != null) t.trustManager(options.tls.ca());
          if (options.tls.cert() != null) t.keyManager(options.tls.cert(), options.tls.key());
          creds = t.build();
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      }
      ManagedChannelBuilder<?> cb = Grpc.newChannelBuilder(a, creds)
          // the SDK's observers only hand a message to a queue: run them on the transport's
          // thread instead of hopping through an executor for every message
          .directExecutor()
          .maxInboundMessageSize(options.maxMessageBytes)
          .keepAliveTime(options.keepalive.toMillis(), TimeUnit.MILLISECONDS)
          .keepAliveTimeout(options.keepalive.toMillis(), TimeUnit.MILLISECONDS);
      if (options.tls != null && options.tls.serverName() != null) cb.overrideAuthority(options.tls.serverName());
      return cb.build();
    });
  }

  private <S extends AbstractStub<S>> S stub(S s, Duration timeout, boolean read) {
    Metadata md = new Metadata();
    md.merge(headers);
    if (read && servers.many() && !servers.readAny) {
      md.put(Metadata.Key.of(Servers.READ_FROM_KEY, Metadata.ASCII_STRING_MARSHALLER), "primary");
    }
    ClientInterceptor i = MetadataUtils.newAttachHeadersInterceptor(md);
    S out = s.withInterceptors(i);
    return timeout == null ? out : out.withDeadlineAfter(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  private SowServiceGrpc.SowServiceBlockingStub blocking(String address, Duration timeout, boolean read) {
    return stub(SowServiceGrpc.newBlockingStub(channel(address)), timeout, read);
  }

  private SowServiceGrpc.SowServiceStub async(String address, Duration timeout, boolean read) {
    return stub(SowServiceGrpc.newStub(channel(address)), timeout, read);
  }

  /** The addresses of this client's servers. */
  public List<String> servers() {
    return servers.addresses;
  }

  // --- failover: where a call goes, and again after a failure (Servers decides)

  /** A server for a call of {@code failover}: asked its role first when it must be the primary and is not known to be. */
  private String reach(Servers.Failover failover) {
    while (true) {
      String address = failover.address();
      if (!failover.needsConfirm(address)) return address;
      try {
        String role = roleOf(address);
        if (!role.isEmpty() && !role.equals("primary")) {
          throw SowdbException.of(Status.Code.UNAVAILABLE, address + " is " + role + ", not the primary",
              List.of(), "", Map.of(), null);
        }
        servers.primary = address;
        return address;
      } catch (SowdbException e) {
        Servers.sleep(failover.failed(address, e));
      }
    }
  }

  private String roleOf(String address) {
    try {
      var reply = stub(AdminServiceGrpc.newBlockingStub(channel(address)), Duration.ofMillis(PROBE_TIMEOUT_MS), false)
          .clusterStatus(ClusterStatusRequest.getDefaultInstance());
      return reply.getNodesCount() == 0 ? "" : reply.getNodes(0).getRole();
    } catch (StatusRuntimeException e) {
      SowdbException s = SowdbException.from(e);
      if (s.code() == Status.Code.FAILED_PRECONDITION || s.code() == Status.Code.PERMISSION_DENIED) return "";
      throw s;
    }
  }

  /** A unary call on the server its kind goes to, again elsewhere after a failover. */
  private <T> T call(boolean write, Function<String, T> fn) {
    if (!servers.many()) {
      try {
        return fn.apply(servers.addresses.get(0));
      } catch (StatusRuntimeException e) {
        throw SowdbException.from(e);
      }
    }
    Servers.Failover failover = servers.failover(write);
    while (true) {
      String address = reach(failover);
      try {
        return fn.apply(address);
      } catch (StatusRuntimeException e) {
        Servers.sleep(failover.failed(address, SowdbException.from(e)));
      }
    }
  }

  /** Opens a stream in its own cancellable context (its cancellation ends the call). */
  private static <T> T inContext(Context.CancellableContext ctx, java.util.function.Supplier<T> open) {
    Context previous = ctx.attach();
    try {
      return open.get();
    } finally {
      ctx.detach(previous);
    }
  }

  // --- the calls

  /**
   * Publishes documents (maps, JsonNodes, beans, or JSON text as String/byte[]) in atomic
   * requests of {@code batchSize} (default 100) over one stream; returns once every request is
   * acknowledged.
   *
   * @throws PublishException a request was refused: it and every later one are not stored, the
   *     earlier ones are ({@link PublishException#stored()})
   * @throws SowdbException the call failed
   */
  public PublishAck publish(String topic, Iterable<?> docs) {
    return publish(topic, docs, PublishOptions.of());
  }

  public PublishAck publish(String topic, Iterable<?> docs, PublishOptions given) {
    PublishOptions opts = given.copy();
    if (!servers.many()) {
      Publisher p = new Publisher(topic, docs, opts, options.maxMessageBytes);
      return p.attempt(stub(SowServiceGrpc.newStub(channel(servers.addresses.get(0))), opts.timeout, false), () -> {});
    }
    String[] producer = null;
    if (opts.producerId.isEmpty()) {
      producer = servers.takeProducer();
      opts.producerId(producer[0]).producerSeq(Long.parseLong(producer[1]));
    }
    Publisher p = new Publisher(topic, docs, opts, options.maxMessageBytes);
    Servers.Failover failover = servers.failover(true);
    try {
      while (true) {
        String address = reach(failover);
        try {
          return p.attempt(stub(SowServiceGrpc.newStub(channel(address)), opts.timeout, false), failover::succeeded);
        } catch (PublishException e) {
          if (!Servers.isRedirect(e)) throw e;
          Servers.sleep(failover.failed(address, e));
        } catch (SowdbException e) {
          Servers.sleep(failover.failed(address, e));
        }
      }
    } finally {
      if (producer != null) servers.giveBack(producer[0], opts.producerSeq + p.requestsMade());
    }
  }

  /** Every record of a topic (or of every topic a regex matches). */
  public SowResult sow(String topic) {
    return sow(topic, Query.of());
  }

  /**
   * Queries the state of a topic: {@code for (Record r : client.sow("orders", Query.of().filter(...)))}.
   * The records arrive as they are read; {@link SowResult#groupEnd()} has the counts once read to the end.
   */
  public SowResult sow(String topic, Query q) {
    var request = q.sowRequest(topic);
    Servers.Failover failover = servers.failover(false);
    while (true) {
      String address = servers.many() ? reach(failover) : servers.addresses.get(0);
      Context.CancellableContext ctx = Context.current().withCancellation();
      Iterator<SowResponse> it = inContext(ctx, () -> {
        Prefetch<SowRequest, SowResponse> p = new Prefetch<>();
        async(address, q.timeout, true).sow(request, p);
        return p;
      });
      try {
        it.hasNext(); // a refusal (a replica, a bad filter) arrives before any answer
        return new SowResult(it, ctx);
      } catch (StatusRuntimeException e) {
        ctx.cancel(null);
        SowdbException s = SowdbException.from(e);
        if (!servers.many()) throw s;
        Servers.sleep(failover.failed(address, s));
      }
    }
  }

  /** A subscription to every later message of a topic (or regex); {@code bookmark} replays the journal after that point first. */
  public Subscription subscribe(String topic, Query q) {
    var request = q.subscribeRequest(topic);
    if (!servers.many()) {
      String address = servers.addresses.get(0);
      return new Subscription((error, progressed) -> {
        Context.CancellableContext ctx = Context.current().withCancellation();
        var it = inContext(ctx, () -> {
          Prefetch<SubscribeRequest, SubscribeResponse> p = new Prefetch<>();
          async(address, q.timeout, true).subscribe(request, p);
          return p;
        });
        return new Subscription.Opened(Subscription.mapped(it, Event::of), ctx, address);
      }, null, false);
    }
    Subscription.Resume resume = new Subscription.Resume(request, q.timeout != null);
    Servers.Failover failover = servers.failover(false);
    String[] at = {""}; // the server of the attempt that failed
    return new Subscription((error, progressed) -> {
      if (progressed) failover.succeeded();
      if (error != null) Servers.sleep(failover.failed(at[0], error));
      String address = reach(failover);
      at[0] = address;
      Context.CancellableContext ctx = Context.current().withCancellation();
      var it = inContext(ctx, () -> {
        Prefetch<SubscribeRequest, SubscribeResponse> p = new Prefetch<>();
        async(address, q.timeout, true).subscribe(resume.resumedRequest(), p);
        return p;
      });
      return new Subscription.Opened(Subscription.mapped(it, Event::of), ctx, address);
    }, resume, true);
  }

  /**
   * A query and a subscription at one atomic point: {@code subscribed}, {@code group_begin}, the
   * query's records ({@code SOW} events), {@code group_end}, then live events; feed them to a
   * {@link Mirror}. Over a server list it is placed as reads are, and ends with an error when its
   * server fails (issue it again for a fresh state), as in the Python SDK.
   */
  public Subscription sowAndSubscribe(String topic, Query q) {
    var request = q.sowAndSubscribeRequest(topic);
    Servers.Failover failover = servers.failover(false);
    return new Subscription((error, progressed) -> {
      String address = servers.many() ? reach(failover) : servers.addresses.get(0);
      Context.CancellableContext ctx = Context.current().withCancellation();
      var it = inContext(ctx, () -> {
        Prefetch<SowAndSubscribeRequest, SowAndSubscribeResponse> p = new Prefetch<>();
        async(address, q.timeout, true).sowAndSubscribe(request, p);
        return p;
      });
      return new Subscription.Opened(Subscription.mapped(it, Event::of), ctx, address);
    }, null, false);
  }

  /** Deletes the records a filter matches; returns how many the server deleted. */
  public long sowDelete(String topic, String filter) {
    return sowDelete(topic, filter, null);
  }

  public long sowDelete(String topic, String filter, Duration timeout) {
    var request = SowDeleteRequest.newBuilder().setTopic(topic).setFilter(filter).build();
    return call(true, a -> blocking(a, timeout, false).sowDelete(request).getDeletedCount());
  }

  /** The topics this user may read. */
  public List<TopicInfo> listTopics() {
    return call(false, a -> blocking(a, null, true).listTopics(ListTopicsRequest.getDefaultInstance()).getTopicsList());
  }

  /** The cluster's nodes as the server answering sees them (itself first). */
  public List<ClusterNode> clusterStatus() {
    return call(false, a -> stub(AdminServiceGrpc.newBlockingStub(channel(a)), Duration.ofSeconds(10), false)
        .clusterStatus(ClusterStatusRequest.getDefaultInstance()).getNodesList());
  }

  /** The primary among this client's servers, waiting up to failoverTimeout for one. */
  public String findPrimary() {
    return call(true, a -> a);
  }

  @Override
  public void close() {
    List<ManagedChannel> open = new ArrayList<>(channels.values());
    channels.clear();
    for (ManagedChannel c : open) c.shutdownNow();
  }
}
