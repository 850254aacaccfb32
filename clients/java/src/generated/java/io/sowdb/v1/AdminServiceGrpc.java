package io.sowdb.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The operations service.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class AdminServiceGrpc {

  private AdminServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "sowdb.v1.AdminService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.CheckpointRequest,
      io.sowdb.v1.CheckpointResponse> getCheckpointMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Checkpoint",
      requestType = io.sowdb.v1.CheckpointRequest.class,
      responseType = io.sowdb.v1.CheckpointResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.CheckpointRequest,
      io.sowdb.v1.CheckpointResponse> getCheckpointMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.CheckpointRequest, io.sowdb.v1.CheckpointResponse> getCheckpointMethod;
    if ((getCheckpointMethod = AdminServiceGrpc.getCheckpointMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getCheckpointMethod = AdminServiceGrpc.getCheckpointMethod) == null) {
          AdminServiceGrpc.getCheckpointMethod = getCheckpointMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.CheckpointRequest, io.sowdb.v1.CheckpointResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Checkpoint"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.CheckpointRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.CheckpointResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("Checkpoint"))
              .build();
        }
      }
    }
    return getCheckpointMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.StatsRequest,
      io.sowdb.v1.StatsResponse> getStatsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Stats",
      requestType = io.sowdb.v1.StatsRequest.class,
      responseType = io.sowdb.v1.StatsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.StatsRequest,
      io.sowdb.v1.StatsResponse> getStatsMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.StatsRequest, io.sowdb.v1.StatsResponse> getStatsMethod;
    if ((getStatsMethod = AdminServiceGrpc.getStatsMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getStatsMethod = AdminServiceGrpc.getStatsMethod) == null) {
          AdminServiceGrpc.getStatsMethod = getStatsMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.StatsRequest, io.sowdb.v1.StatsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Stats"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.StatsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.StatsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("Stats"))
              .build();
        }
      }
    }
    return getStatsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.ClusterStatusRequest,
      io.sowdb.v1.ClusterStatusResponse> getClusterStatusMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ClusterStatus",
      requestType = io.sowdb.v1.ClusterStatusRequest.class,
      responseType = io.sowdb.v1.ClusterStatusResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.ClusterStatusRequest,
      io.sowdb.v1.ClusterStatusResponse> getClusterStatusMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.ClusterStatusRequest, io.sowdb.v1.ClusterStatusResponse> getClusterStatusMethod;
    if ((getClusterStatusMethod = AdminServiceGrpc.getClusterStatusMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getClusterStatusMethod = AdminServiceGrpc.getClusterStatusMethod) == null) {
          AdminServiceGrpc.getClusterStatusMethod = getClusterStatusMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.ClusterStatusRequest, io.sowdb.v1.ClusterStatusResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ClusterStatus"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ClusterStatusRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ClusterStatusResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ClusterStatus"))
              .build();
        }
      }
    }
    return getClusterStatusMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.SwitchoverRequest,
      io.sowdb.v1.SwitchoverResponse> getSwitchoverMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Switchover",
      requestType = io.sowdb.v1.SwitchoverRequest.class,
      responseType = io.sowdb.v1.SwitchoverResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.SwitchoverRequest,
      io.sowdb.v1.SwitchoverResponse> getSwitchoverMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.SwitchoverRequest, io.sowdb.v1.SwitchoverResponse> getSwitchoverMethod;
    if ((getSwitchoverMethod = AdminServiceGrpc.getSwitchoverMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getSwitchoverMethod = AdminServiceGrpc.getSwitchoverMethod) == null) {
          AdminServiceGrpc.getSwitchoverMethod = getSwitchoverMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.SwitchoverRequest, io.sowdb.v1.SwitchoverResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Switchover"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SwitchoverRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SwitchoverResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("Switchover"))
              .build();
        }
      }
    }
    return getSwitchoverMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static AdminServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub>() {
        @java.lang.Override
        public AdminServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceStub(channel, callOptions);
        }
      };
    return AdminServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static AdminServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingV2Stub>() {
        @java.lang.Override
        public AdminServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return AdminServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static AdminServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub>() {
        @java.lang.Override
        public AdminServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceBlockingStub(channel, callOptions);
        }
      };
    return AdminServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static AdminServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub>() {
        @java.lang.Override
        public AdminServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceFutureStub(channel, callOptions);
        }
      };
    return AdminServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The operations service.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Writes a consistent copy of the whole store (a RocksDB checkpoint: hard links where the
     * filesystem allows) into a new directory on the server's machine, at one point of the total
     * order, while the server keeps serving. The copy is a complete data directory: start a server
     * on it to restore.
     * </pre>
     */
    default void checkpoint(io.sowdb.v1.CheckpointRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.CheckpointResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCheckpointMethod(), responseObserver);
    }

    /**
     * <pre>
     * The server's figures, taken at one point of the total order: per topic (records, publishes,
     * deletes, bytes, subscriptions), the live subscriptions with their queues, and server-wide
     * figures (journal, RocksDB size on disk, calls per RPC with errors by code, the process's CPU
     * and memory). The same figures as the Prometheus metrics on `[server] metrics_listen`.
     * With security on (SPEC §11): the topics are those the caller may read (a topic named that it
     * may not read is PERMISSION_DENIED); the server-wide figures and other users' subscriptions
     * need an admin role, so a caller without one asks with `topics_only` (else PERMISSION_DENIED)
     * and gets the topics' figures and its own subscriptions.
     * </pre>
     */
    default void stats(io.sowdb.v1.StatsRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.StatsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getStatsMethod(), responseObserver);
    }

    /**
     * <pre>
     * The cluster as this node sees it (SPEC §13): itself, and on the primary every replica that
     * follows it, each with its role, epoch and applied bookmark. A server without `[cluster]`
     * answers FAILED_PRECONDITION.
     * </pre>
     */
    default void clusterStatus(io.sowdb.v1.ClusterStatusRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ClusterStatusResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getClusterStatusMethod(), responseObserver);
    }

    /**
     * <pre>
     * Hands the primary role over to a replica with nothing lost (SPEC §13, HA-4; `sowd
     * switchover`). Asked of the primary, by an admin. The primary stops acknowledging, waits until
     * the target has applied its last bookmark, then gives up the leader key, which the target takes
     * at a higher epoch; the old primary then follows it. Answers once the target leads.
     * FAILED_PRECONDITION: this node is not the primary (ErrorInfo `primary` names it), no replica
     * follows, or `to` does not follow this primary; UNAVAILABLE: the target did not catch up or
     * take the key in time (nothing changed hands: the primary acknowledges again).
     * </pre>
     */
    default void switchover(io.sowdb.v1.SwitchoverRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SwitchoverResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSwitchoverMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service AdminService.
   * <pre>
   * The operations service.
   * </pre>
   */
  public static abstract class AdminServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return AdminServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service AdminService.
   * <pre>
   * The operations service.
   * </pre>
   */
  public static final class AdminServiceStub
      extends io.grpc.stub.AbstractAsyncStub<AdminServiceStub> {
    private AdminServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Writes a consistent copy of the whole store (a RocksDB checkpoint: hard links where the
     * filesystem allows) into a new directory on the server's machine, at one point of the total
     * order, while the server keeps serving. The copy is a complete data directory: start a server
     * on it to restore.
     * </pre>
     */
    public void checkpoint(io.sowdb.v1.CheckpointRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.CheckpointResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCheckpointMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * The server's figures, taken at one point of the total order: per topic (records, publishes,
     * deletes, bytes, subscriptions), the live subscriptions with their queues, and server-wide
     * figures (journal, RocksDB size on disk, calls per RPC with errors by code, the process's CPU
     * and memory). The same figures as the Prometheus metrics on `[server] metrics_listen`.
     * With security on (SPEC §11): the topics are those the caller may read (a topic named that it
     * may not read is PERMISSION_DENIED); the server-wide figures and other users' subscriptions
     * need an admin role, so a caller without one asks with `topics_only` (else PERMISSION_DENIED)
     * and gets the topics' figures and its own subscriptions.
     * </pre>
     */
    public void stats(io.sowdb.v1.StatsRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.StatsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getStatsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * The cluster as this node sees it (SPEC §13): itself, and on the primary every replica that
     * follows it, each with its role, epoch and applied bookmark. A server without `[cluster]`
     * answers FAILED_PRECONDITION.
     * </pre>
     */
    public void clusterStatus(io.sowdb.v1.ClusterStatusRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ClusterStatusResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getClusterStatusMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Hands the primary role over to a replica with nothing lost (SPEC §13, HA-4; `sowd
     * switchover`). Asked of the primary, by an admin. The primary stops acknowledging, waits until
     * the target has applied its last bookmark, then gives up the leader key, which the target takes
     * at a higher epoch; the old primary then follows it. Answers once the target leads.
     * FAILED_PRECONDITION: this node is not the primary (ErrorInfo `primary` names it), no replica
     * follows, or `to` does not follow this primary; UNAVAILABLE: the target did not catch up or
     * take the key in time (nothing changed hands: the primary acknowledges again).
     * </pre>
     */
    public void switchover(io.sowdb.v1.SwitchoverRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SwitchoverResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSwitchoverMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service AdminService.
   * <pre>
   * The operations service.
   * </pre>
   */
  public static final class AdminServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<AdminServiceBlockingV2Stub> {
    private AdminServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Writes a consistent copy of the whole store (a RocksDB checkpoint: hard links where the
     * filesystem allows) into a new directory on the server's machine, at one point of the total
     * order, while the server keeps serving. The copy is a complete data directory: start a server
     * on it to restore.
     * </pre>
     */
    public io.sowdb.v1.CheckpointResponse checkpoint(io.sowdb.v1.CheckpointRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCheckpointMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The server's figures, taken at one point of the total order: per topic (records, publishes,
     * deletes, bytes, subscriptions), the live subscriptions with their queues, and server-wide
     * figures (journal, RocksDB size on disk, calls per RPC with errors by code, the process's CPU
     * and memory). The same figures as the Prometheus metrics on `[server] metrics_listen`.
     * With security on (SPEC §11): the topics are those the caller may read (a topic named that it
     * may not read is PERMISSION_DENIED); the server-wide figures and other users' subscriptions
     * need an admin role, so a caller without one asks with `topics_only` (else PERMISSION_DENIED)
     * and gets the topics' figures and its own subscriptions.
     * </pre>
     */
    public io.sowdb.v1.StatsResponse stats(io.sowdb.v1.StatsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getStatsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The cluster as this node sees it (SPEC §13): itself, and on the primary every replica that
     * follows it, each with its role, epoch and applied bookmark. A server without `[cluster]`
     * answers FAILED_PRECONDITION.
     * </pre>
     */
    public io.sowdb.v1.ClusterStatusResponse clusterStatus(io.sowdb.v1.ClusterStatusRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getClusterStatusMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Hands the primary role over to a replica with nothing lost (SPEC §13, HA-4; `sowd
     * switchover`). Asked of the primary, by an admin. The primary stops acknowledging, waits until
     * the target has applied its last bookmark, then gives up the leader key, which the target takes
     * at a higher epoch; the old primary then follows it. Answers once the target leads.
     * FAILED_PRECONDITION: this node is not the primary (ErrorInfo `primary` names it), no replica
     * follows, or `to` does not follow this primary; UNAVAILABLE: the target did not catch up or
     * take the key in time (nothing changed hands: the primary acknowledges again).
     * </pre>
     */
    public io.sowdb.v1.SwitchoverResponse switchover(io.sowdb.v1.SwitchoverRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getSwitchoverMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service AdminService.
   * <pre>
   * The operations service.
   * </pre>
   */
  public static final class AdminServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<AdminServiceBlockingStub> {
    private AdminServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Writes a consistent copy of the whole store (a RocksDB checkpoint: hard links where the
     * filesystem allows) into a new directory on the server's machine, at one point of the total
     * order, while the server keeps serving. The copy is a complete data directory: start a server
     * on it to restore.
     * </pre>
     */
    public io.sowdb.v1.CheckpointResponse checkpoint(io.sowdb.v1.CheckpointRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCheckpointMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The server's figures, taken at one point of the total order: per topic (records, publishes,
     * deletes, bytes, subscriptions), the live subscriptions with their queues, and server-wide
     * figures (journal, RocksDB size on disk, calls per RPC with errors by code, the process's CPU
     * and memory). The same figures as the Prometheus metrics on `[server] metrics_listen`.
     * With security on (SPEC §11): the topics are those the caller may read (a topic named that it
     * may not read is PERMISSION_DENIED); the server-wide figures and other users' subscriptions
     * need an admin role, so a caller without one asks with `topics_only` (else PERMISSION_DENIED)
     * and gets the topics' figures and its own subscriptions.
     * </pre>
     */
    public io.sowdb.v1.StatsResponse stats(io.sowdb.v1.StatsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getStatsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The cluster as this node sees it (SPEC §13): itself, and on the primary every replica that
     * follows it, each with its role, epoch and applied bookmark. A server without `[cluster]`
     * answers FAILED_PRECONDITION.
     * </pre>
     */
    public io.sowdb.v1.ClusterStatusResponse clusterStatus(io.sowdb.v1.ClusterStatusRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getClusterStatusMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Hands the primary role over to a replica with nothing lost (SPEC §13, HA-4; `sowd
     * switchover`). Asked of the primary, by an admin. The primary stops acknowledging, waits until
     * the target has applied its last bookmark, then gives up the leader key, which the target takes
     * at a higher epoch; the old primary then follows it. Answers once the target leads.
     * FAILED_PRECONDITION: this node is not the primary (ErrorInfo `primary` names it), no replica
     * follows, or `to` does not follow this primary; UNAVAILABLE: the target did not catch up or
     * take the key in time (nothing changed hands: the primary acknowledges again).
     * </pre>
     */
    public io.sowdb.v1.SwitchoverResponse switchover(io.sowdb.v1.SwitchoverRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSwitchoverMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service AdminService.
   * <pre>
   * The operations service.
   * </pre>
   */
  public static final class AdminServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<AdminServiceFutureStub> {
    private AdminServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Writes a consistent copy of the whole store (a RocksDB checkpoint: hard links where the
     * filesystem allows) into a new directory on the server's machine, at one point of the total
     * order, while the server keeps serving. The copy is a complete data directory: start a server
     * on it to restore.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.CheckpointResponse> checkpoint(
        io.sowdb.v1.CheckpointRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCheckpointMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The server's figures, taken at one point of the total order: per topic (records, publishes,
     * deletes, bytes, subscriptions), the live subscriptions with their queues, and server-wide
     * figures (journal, RocksDB size on disk, calls per RPC with errors by code, the process's CPU
     * and memory). The same figures as the Prometheus metrics on `[server] metrics_listen`.
     * With security on (SPEC §11): the topics are those the caller may read (a topic named that it
     * may not read is PERMISSION_DENIED); the server-wide figures and other users' subscriptions
     * need an admin role, so a caller without one asks with `topics_only` (else PERMISSION_DENIED)
     * and gets the topics' figures and its own subscriptions.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.StatsResponse> stats(
        io.sowdb.v1.StatsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getStatsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The cluster as this node sees it (SPEC §13): itself, and on the primary every replica that
     * follows it, each with its role, epoch and applied bookmark. A server without `[cluster]`
     * answers FAILED_PRECONDITION.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.ClusterStatusResponse> clusterStatus(
        io.sowdb.v1.ClusterStatusRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getClusterStatusMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Hands the primary role over to a replica with nothing lost (SPEC §13, HA-4; `sowd
     * switchover`). Asked of the primary, by an admin. The primary stops acknowledging, waits until
     * the target has applied its last bookmark, then gives up the leader key, which the target takes
     * at a higher epoch; the old primary then follows it. Answers once the target leads.
     * FAILED_PRECONDITION: this node is not the primary (ErrorInfo `primary` names it), no replica
     * follows, or `to` does not follow this primary; UNAVAILABLE: the target did not catch up or
     * take the key in time (nothing changed hands: the primary acknowledges again).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.SwitchoverResponse> switchover(
        io.sowdb.v1.SwitchoverRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSwitchoverMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_CHECKPOINT = 0;
  private static final int METHODID_STATS = 1;
  private static final int METHODID_CLUSTER_STATUS = 2;
  private static final int METHODID_SWITCHOVER = 3;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_CHECKPOINT:
          serviceImpl.checkpoint((io.sowdb.v1.CheckpointRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.CheckpointResponse>) responseObserver);
          break;
        case METHODID_STATS:
          serviceImpl.stats((io.sowdb.v1.StatsRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.StatsResponse>) responseObserver);
          break;
        case METHODID_CLUSTER_STATUS:
          serviceImpl.clusterStatus((io.sowdb.v1.ClusterStatusRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.ClusterStatusResponse>) responseObserver);
          break;
        case METHODID_SWITCHOVER:
          serviceImpl.switchover((io.sowdb.v1.SwitchoverRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.SwitchoverResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getCheckpointMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.CheckpointRequest,
              io.sowdb.v1.CheckpointResponse>(
                service, METHODID_CHECKPOINT)))
        .addMethod(
          getStatsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.StatsRequest,
              io.sowdb.v1.StatsResponse>(
                service, METHODID_STATS)))
        .addMethod(
          getClusterStatusMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.ClusterStatusRequest,
              io.sowdb.v1.ClusterStatusResponse>(
                service, METHODID_CLUSTER_STATUS)))
        .addMethod(
          getSwitchoverMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.SwitchoverRequest,
              io.sowdb.v1.SwitchoverResponse>(
                service, METHODID_SWITCHOVER)))
        .build();
  }

  private static abstract class AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    AdminServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return io.sowdb.v1.AdminProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("AdminService");
    }
  }

  private static final class AdminServiceFileDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier {
    AdminServiceFileDescriptorSupplier() {}
  }

  private static final class AdminServiceMethodDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    AdminServiceMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (AdminServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new AdminServiceFileDescriptorSupplier())
              .addMethod(getCheckpointMethod())
              .addMethod(getStatsMethod())
              .addMethod(getClusterStatusMethod())
              .addMethod(getSwitchoverMethod())
              .build();
        }
      }
    }
    return result;
  }
}
