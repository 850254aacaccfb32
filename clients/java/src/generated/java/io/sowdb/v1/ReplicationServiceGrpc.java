package io.sowdb.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The primary's side of replication; replicas call it, clients have no use for it.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class ReplicationServiceGrpc {

  private ReplicationServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "sowdb.v1.ReplicationService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.FollowRequest,
      io.sowdb.v1.FollowResponse> getFollowMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Follow",
      requestType = io.sowdb.v1.FollowRequest.class,
      responseType = io.sowdb.v1.FollowResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.FollowRequest,
      io.sowdb.v1.FollowResponse> getFollowMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.FollowRequest, io.sowdb.v1.FollowResponse> getFollowMethod;
    if ((getFollowMethod = ReplicationServiceGrpc.getFollowMethod) == null) {
      synchronized (ReplicationServiceGrpc.class) {
        if ((getFollowMethod = ReplicationServiceGrpc.getFollowMethod) == null) {
          ReplicationServiceGrpc.getFollowMethod = getFollowMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.FollowRequest, io.sowdb.v1.FollowResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Follow"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.FollowRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.FollowResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ReplicationServiceMethodDescriptorSupplier("Follow"))
              .build();
        }
      }
    }
    return getFollowMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.CopyCheckpointRequest,
      io.sowdb.v1.CopyCheckpointResponse> getCopyCheckpointMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CopyCheckpoint",
      requestType = io.sowdb.v1.CopyCheckpointRequest.class,
      responseType = io.sowdb.v1.CopyCheckpointResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.CopyCheckpointRequest,
      io.sowdb.v1.CopyCheckpointResponse> getCopyCheckpointMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.CopyCheckpointRequest, io.sowdb.v1.CopyCheckpointResponse> getCopyCheckpointMethod;
    if ((getCopyCheckpointMethod = ReplicationServiceGrpc.getCopyCheckpointMethod) == null) {
      synchronized (ReplicationServiceGrpc.class) {
        if ((getCopyCheckpointMethod = ReplicationServiceGrpc.getCopyCheckpointMethod) == null) {
          ReplicationServiceGrpc.getCopyCheckpointMethod = getCopyCheckpointMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.CopyCheckpointRequest, io.sowdb.v1.CopyCheckpointResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CopyCheckpoint"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.CopyCheckpointRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.CopyCheckpointResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ReplicationServiceMethodDescriptorSupplier("CopyCheckpoint"))
              .build();
        }
      }
    }
    return getCopyCheckpointMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static ReplicationServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ReplicationServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ReplicationServiceStub>() {
        @java.lang.Override
        public ReplicationServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ReplicationServiceStub(channel, callOptions);
        }
      };
    return ReplicationServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static ReplicationServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ReplicationServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ReplicationServiceBlockingV2Stub>() {
        @java.lang.Override
        public ReplicationServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ReplicationServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return ReplicationServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static ReplicationServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ReplicationServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ReplicationServiceBlockingStub>() {
        @java.lang.Override
        public ReplicationServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ReplicationServiceBlockingStub(channel, callOptions);
        }
      };
    return ReplicationServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static ReplicationServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ReplicationServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ReplicationServiceFutureStub>() {
        @java.lang.Override
        public ReplicationServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ReplicationServiceFutureStub(channel, callOptions);
        }
      };
    return ReplicationServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The primary's side of replication; replicas call it, clients have no use for it.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * A replica opens the stream to the primary named by the cluster's leader key. Its first
     * request says who it is, the epoch it knows and its last applied bookmark; every later
     * request reports the bookmark it has applied since (what `sync` acknowledgement waits on).
     * The primary answers with its journal from the replica's bookmark on, then with each batch
     * as it is written; every frame carries the primary's epoch. A primary that is not (or no
     * longer) the primary, or that knows an older epoch than the replica, ends the stream with
     * FAILED_PRECONDITION; a replica whose bookmark the journal no longer holds gets OUT_OF_RANGE.
     * </pre>
     */
    default io.grpc.stub.StreamObserver<io.sowdb.v1.FollowRequest> follow(
        io.grpc.stub.StreamObserver<io.sowdb.v1.FollowResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getFollowMethod(), responseObserver);
    }

    /**
     * <pre>
     * A replica that Follow refused with OUT_OF_RANGE (journal retention removed entries it has not
     * applied) copies the primary's store instead: the primary takes a fresh checkpoint (as `sowd
     * checkpoint` does) and streams its files, chunk by chunk, then a last message with `done` and
     * the checkpoint's bookmark. The replica installs the copy and follows from that bookmark.
     * </pre>
     */
    default void copyCheckpoint(io.sowdb.v1.CopyCheckpointRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.CopyCheckpointResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCopyCheckpointMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service ReplicationService.
   * <pre>
   * The primary's side of replication; replicas call it, clients have no use for it.
   * </pre>
   */
  public static abstract class ReplicationServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return ReplicationServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service ReplicationService.
   * <pre>
   * The primary's side of replication; replicas call it, clients have no use for it.
   * </pre>
   */
  public static final class ReplicationServiceStub
      extends io.grpc.stub.AbstractAsyncStub<ReplicationServiceStub> {
    private ReplicationServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ReplicationServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ReplicationServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * A replica opens the stream to the primary named by the cluster's leader key. Its first
     * request says who it is, the epoch it knows and its last applied bookmark; every later
     * request reports the bookmark it has applied since (what `sync` acknowledgement waits on).
     * The primary answers with its journal from the replica's bookmark on, then with each batch
     * as it is written; every frame carries the primary's epoch. A primary that is not (or no
     * longer) the primary, or that knows an older epoch than the replica, ends the stream with
     * FAILED_PRECONDITION; a replica whose bookmark the journal no longer holds gets OUT_OF_RANGE.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<io.sowdb.v1.FollowRequest> follow(
        io.grpc.stub.StreamObserver<io.sowdb.v1.FollowResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncBidiStreamingCall(
          getChannel().newCall(getFollowMethod(), getCallOptions()), responseObserver);
    }

    /**
     * <pre>
     * A replica that Follow refused with OUT_OF_RANGE (journal retention removed entries it has not
     * applied) copies the primary's store instead: the primary takes a fresh checkpoint (as `sowd
     * checkpoint` does) and streams its files, chunk by chunk, then a last message with `done` and
     * the checkpoint's bookmark. The replica installs the copy and follows from that bookmark.
     * </pre>
     */
    public void copyCheckpoint(io.sowdb.v1.CopyCheckpointRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.CopyCheckpointResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getCopyCheckpointMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service ReplicationService.
   * <pre>
   * The primary's side of replication; replicas call it, clients have no use for it.
   * </pre>
   */
  public static final class ReplicationServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<ReplicationServiceBlockingV2Stub> {
    private ReplicationServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ReplicationServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ReplicationServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * A replica opens the stream to the primary named by the cluster's leader key. Its first
     * request says who it is, the epoch it knows and its last applied bookmark; every later
     * request reports the bookmark it has applied since (what `sync` acknowledgement waits on).
     * The primary answers with its journal from the replica's bookmark on, then with each batch
     * as it is written; every frame carries the primary's epoch. A primary that is not (or no
     * longer) the primary, or that knows an older epoch than the replica, ends the stream with
     * FAILED_PRECONDITION; a replica whose bookmark the journal no longer holds gets OUT_OF_RANGE.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<io.sowdb.v1.FollowRequest, io.sowdb.v1.FollowResponse>
        follow() {
      return io.grpc.stub.ClientCalls.blockingBidiStreamingCall(
          getChannel(), getFollowMethod(), getCallOptions());
    }

    /**
     * <pre>
     * A replica that Follow refused with OUT_OF_RANGE (journal retention removed entries it has not
     * applied) copies the primary's store instead: the primary takes a fresh checkpoint (as `sowd
     * checkpoint` does) and streams its files, chunk by chunk, then a last message with `done` and
     * the checkpoint's bookmark. The replica installs the copy and follows from that bookmark.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, io.sowdb.v1.CopyCheckpointResponse>
        copyCheckpoint(io.sowdb.v1.CopyCheckpointRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getCopyCheckpointMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service ReplicationService.
   * <pre>
   * The primary's side of replication; replicas call it, clients have no use for it.
   * </pre>
   */
  public static final class ReplicationServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<ReplicationServiceBlockingStub> {
    private ReplicationServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ReplicationServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ReplicationServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * A replica that Follow refused with OUT_OF_RANGE (journal retention removed entries it has not
     * applied) copies the primary's store instead: the primary takes a fresh checkpoint (as `sowd
     * checkpoint` does) and streams its files, chunk by chunk, then a last message with `done` and
     * the checkpoint's bookmark. The replica installs the copy and follows from that bookmark.
     * </pre>
     */
    public java.util.Iterator<io.sowdb.v1.CopyCheckpointResponse> copyCheckpoint(
        io.sowdb.v1.CopyCheckpointRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getCopyCheckpointMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service ReplicationService.
   * <pre>
   * The primary's side of replication; replicas call it, clients have no use for it.
   * </pre>
   */
  public static final class ReplicationServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<ReplicationServiceFutureStub> {
    private ReplicationServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ReplicationServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ReplicationServiceFutureStub(channel, callOptions);
    }
  }

  private static final int METHODID_COPY_CHECKPOINT = 0;
  private static final int METHODID_FOLLOW = 1;

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
        case METHODID_COPY_CHECKPOINT:
          serviceImpl.copyCheckpoint((io.sowdb.v1.CopyCheckpointRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.CopyCheckpointResponse>) responseObserver);
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
        case METHODID_FOLLOW:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.follow(
              (io.grpc.stub.StreamObserver<io.sowdb.v1.FollowResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getFollowMethod(),
          io.grpc.stub.ServerCalls.asyncBidiStreamingCall(
            new MethodHandlers<
              io.sowdb.v1.FollowRequest,
              io.sowdb.v1.FollowResponse>(
                service, METHODID_FOLLOW)))
        .addMethod(
          getCopyCheckpointMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              io.sowdb.v1.CopyCheckpointRequest,
              io.sowdb.v1.CopyCheckpointResponse>(
                service, METHODID_COPY_CHECKPOINT)))
        .build();
  }

  private static abstract class ReplicationServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    ReplicationServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return io.sowdb.v1.ReplicationProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("ReplicationService");
    }
  }

  private static final class ReplicationServiceFileDescriptorSupplier
      extends ReplicationServiceBaseDescriptorSupplier {
    ReplicationServiceFileDescriptorSupplier() {}
  }

  private static final class ReplicationServiceMethodDescriptorSupplier
      extends ReplicationServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    ReplicationServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (ReplicationServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new ReplicationServiceFileDescriptorSupplier())
              .addMethod(getFollowMethod())
              .addMethod(getCopyCheckpointMethod())
              .build();
        }
      }
    }
    return result;
  }
}
