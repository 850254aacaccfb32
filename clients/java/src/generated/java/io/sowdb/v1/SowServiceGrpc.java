package io.sowdb.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The State-of-the-World service.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class SowServiceGrpc {

  private SowServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "sowdb.v1.SowService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.PublishRequest,
      io.sowdb.v1.PublishResponse> getPublishMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Publish",
      requestType = io.sowdb.v1.PublishRequest.class,
      responseType = io.sowdb.v1.PublishResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.PublishRequest,
      io.sowdb.v1.PublishResponse> getPublishMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.PublishRequest, io.sowdb.v1.PublishResponse> getPublishMethod;
    if ((getPublishMethod = SowServiceGrpc.getPublishMethod) == null) {
      synchronized (SowServiceGrpc.class) {
        if ((getPublishMethod = SowServiceGrpc.getPublishMethod) == null) {
          SowServiceGrpc.getPublishMethod = getPublishMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.PublishRequest, io.sowdb.v1.PublishResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Publish"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.PublishRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.PublishResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SowServiceMethodDescriptorSupplier("Publish"))
              .build();
        }
      }
    }
    return getPublishMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.SowRequest,
      io.sowdb.v1.SowResponse> getSowMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Sow",
      requestType = io.sowdb.v1.SowRequest.class,
      responseType = io.sowdb.v1.SowResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.SowRequest,
      io.sowdb.v1.SowResponse> getSowMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.SowRequest, io.sowdb.v1.SowResponse> getSowMethod;
    if ((getSowMethod = SowServiceGrpc.getSowMethod) == null) {
      synchronized (SowServiceGrpc.class) {
        if ((getSowMethod = SowServiceGrpc.getSowMethod) == null) {
          SowServiceGrpc.getSowMethod = getSowMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.SowRequest, io.sowdb.v1.SowResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Sow"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SowRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SowResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SowServiceMethodDescriptorSupplier("Sow"))
              .build();
        }
      }
    }
    return getSowMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.SowAndSubscribeRequest,
      io.sowdb.v1.SowAndSubscribeResponse> getSowAndSubscribeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SowAndSubscribe",
      requestType = io.sowdb.v1.SowAndSubscribeRequest.class,
      responseType = io.sowdb.v1.SowAndSubscribeResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.SowAndSubscribeRequest,
      io.sowdb.v1.SowAndSubscribeResponse> getSowAndSubscribeMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.SowAndSubscribeRequest, io.sowdb.v1.SowAndSubscribeResponse> getSowAndSubscribeMethod;
    if ((getSowAndSubscribeMethod = SowServiceGrpc.getSowAndSubscribeMethod) == null) {
      synchronized (SowServiceGrpc.class) {
        if ((getSowAndSubscribeMethod = SowServiceGrpc.getSowAndSubscribeMethod) == null) {
          SowServiceGrpc.getSowAndSubscribeMethod = getSowAndSubscribeMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.SowAndSubscribeRequest, io.sowdb.v1.SowAndSubscribeResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SowAndSubscribe"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SowAndSubscribeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SowAndSubscribeResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SowServiceMethodDescriptorSupplier("SowAndSubscribe"))
              .build();
        }
      }
    }
    return getSowAndSubscribeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.SubscribeRequest,
      io.sowdb.v1.SubscribeResponse> getSubscribeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Subscribe",
      requestType = io.sowdb.v1.SubscribeRequest.class,
      responseType = io.sowdb.v1.SubscribeResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.SubscribeRequest,
      io.sowdb.v1.SubscribeResponse> getSubscribeMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.SubscribeRequest, io.sowdb.v1.SubscribeResponse> getSubscribeMethod;
    if ((getSubscribeMethod = SowServiceGrpc.getSubscribeMethod) == null) {
      synchronized (SowServiceGrpc.class) {
        if ((getSubscribeMethod = SowServiceGrpc.getSubscribeMethod) == null) {
          SowServiceGrpc.getSubscribeMethod = getSubscribeMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.SubscribeRequest, io.sowdb.v1.SubscribeResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Subscribe"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SubscribeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SubscribeResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SowServiceMethodDescriptorSupplier("Subscribe"))
              .build();
        }
      }
    }
    return getSubscribeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.ReplaceSubscriptionRequest,
      io.sowdb.v1.ReplaceSubscriptionResponse> getReplaceSubscriptionMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ReplaceSubscription",
      requestType = io.sowdb.v1.ReplaceSubscriptionRequest.class,
      responseType = io.sowdb.v1.ReplaceSubscriptionResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.ReplaceSubscriptionRequest,
      io.sowdb.v1.ReplaceSubscriptionResponse> getReplaceSubscriptionMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.ReplaceSubscriptionRequest, io.sowdb.v1.ReplaceSubscriptionResponse> getReplaceSubscriptionMethod;
    if ((getReplaceSubscriptionMethod = SowServiceGrpc.getReplaceSubscriptionMethod) == null) {
      synchronized (SowServiceGrpc.class) {
        if ((getReplaceSubscriptionMethod = SowServiceGrpc.getReplaceSubscriptionMethod) == null) {
          SowServiceGrpc.getReplaceSubscriptionMethod = getReplaceSubscriptionMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.ReplaceSubscriptionRequest, io.sowdb.v1.ReplaceSubscriptionResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ReplaceSubscription"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ReplaceSubscriptionRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ReplaceSubscriptionResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SowServiceMethodDescriptorSupplier("ReplaceSubscription"))
              .build();
        }
      }
    }
    return getReplaceSubscriptionMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.SowDeleteRequest,
      io.sowdb.v1.SowDeleteResponse> getSowDeleteMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SowDelete",
      requestType = io.sowdb.v1.SowDeleteRequest.class,
      responseType = io.sowdb.v1.SowDeleteResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.SowDeleteRequest,
      io.sowdb.v1.SowDeleteResponse> getSowDeleteMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.SowDeleteRequest, io.sowdb.v1.SowDeleteResponse> getSowDeleteMethod;
    if ((getSowDeleteMethod = SowServiceGrpc.getSowDeleteMethod) == null) {
      synchronized (SowServiceGrpc.class) {
        if ((getSowDeleteMethod = SowServiceGrpc.getSowDeleteMethod) == null) {
          SowServiceGrpc.getSowDeleteMethod = getSowDeleteMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.SowDeleteRequest, io.sowdb.v1.SowDeleteResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SowDelete"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SowDeleteRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.SowDeleteResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SowServiceMethodDescriptorSupplier("SowDelete"))
              .build();
        }
      }
    }
    return getSowDeleteMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.ListTopicsRequest,
      io.sowdb.v1.ListTopicsResponse> getListTopicsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListTopics",
      requestType = io.sowdb.v1.ListTopicsRequest.class,
      responseType = io.sowdb.v1.ListTopicsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.ListTopicsRequest,
      io.sowdb.v1.ListTopicsResponse> getListTopicsMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.ListTopicsRequest, io.sowdb.v1.ListTopicsResponse> getListTopicsMethod;
    if ((getListTopicsMethod = SowServiceGrpc.getListTopicsMethod) == null) {
      synchronized (SowServiceGrpc.class) {
        if ((getListTopicsMethod = SowServiceGrpc.getListTopicsMethod) == null) {
          SowServiceGrpc.getListTopicsMethod = getListTopicsMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.ListTopicsRequest, io.sowdb.v1.ListTopicsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListTopics"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ListTopicsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ListTopicsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SowServiceMethodDescriptorSupplier("ListTopics"))
              .build();
        }
      }
    }
    return getListTopicsMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static SowServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SowServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SowServiceStub>() {
        @java.lang.Override
        public SowServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SowServiceStub(channel, callOptions);
        }
      };
    return SowServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static SowServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SowServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SowServiceBlockingV2Stub>() {
        @java.lang.Override
        public SowServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SowServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return SowServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static SowServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SowServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SowServiceBlockingStub>() {
        @java.lang.Override
        public SowServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SowServiceBlockingStub(channel, callOptions);
        }
      };
    return SowServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static SowServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SowServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SowServiceFutureStub>() {
        @java.lang.Override
        public SowServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SowServiceFutureStub(channel, callOptions);
        }
      };
    return SowServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The State-of-the-World service.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Publishes batches of messages. Each request is one atomic batch for one topic and gets one
     * response, in order: the bookmarks assigned, or an error for that request alone (the stream
     * stays open).
     * </pre>
     */
    default io.grpc.stub.StreamObserver<io.sowdb.v1.PublishRequest> publish(
        io.grpc.stub.StreamObserver<io.sowdb.v1.PublishResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getPublishMethod(), responseObserver);
    }

    /**
     * <pre>
     * Queries the current state of one or more SOW topics: group_begin, record batches,
     * group_end.
     * </pre>
     */
    default void sow(io.sowdb.v1.SowRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SowResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSowMethod(), responseObserver);
    }

    /**
     * <pre>
     * Queries and subscribes at one atomic point: subscribed, the query's frames, then live
     * events.
     * </pre>
     */
    default void sowAndSubscribe(io.sowdb.v1.SowAndSubscribeRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SowAndSubscribeResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSowAndSubscribeMethod(), responseObserver);
    }

    /**
     * <pre>
     * Subscribes without a query; with a bookmark, first replays the journal after it.
     * </pre>
     */
    default void subscribe(io.sowdb.v1.SubscribeRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SubscribeResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSubscribeMethod(), responseObserver);
    }

    /**
     * <pre>
     * Changes the filter and options of a live subscription.
     * </pre>
     */
    default void replaceSubscription(io.sowdb.v1.ReplaceSubscriptionRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ReplaceSubscriptionResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReplaceSubscriptionMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes records by filter, by SowKeys or by data; returns how many were deleted.
     * </pre>
     */
    default void sowDelete(io.sowdb.v1.SowDeleteRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SowDeleteResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSowDeleteMethod(), responseObserver);
    }

    /**
     * <pre>
     * Lists the configured topics with their record counts.
     * </pre>
     */
    default void listTopics(io.sowdb.v1.ListTopicsRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ListTopicsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListTopicsMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service SowService.
   * <pre>
   * The State-of-the-World service.
   * </pre>
   */
  public static abstract class SowServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return SowServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service SowService.
   * <pre>
   * The State-of-the-World service.
   * </pre>
   */
  public static final class SowServiceStub
      extends io.grpc.stub.AbstractAsyncStub<SowServiceStub> {
    private SowServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SowServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SowServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Publishes batches of messages. Each request is one atomic batch for one topic and gets one
     * response, in order: the bookmarks assigned, or an error for that request alone (the stream
     * stays open).
     * </pre>
     */
    public io.grpc.stub.StreamObserver<io.sowdb.v1.PublishRequest> publish(
        io.grpc.stub.StreamObserver<io.sowdb.v1.PublishResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncBidiStreamingCall(
          getChannel().newCall(getPublishMethod(), getCallOptions()), responseObserver);
    }

    /**
     * <pre>
     * Queries the current state of one or more SOW topics: group_begin, record batches,
     * group_end.
     * </pre>
     */
    public void sow(io.sowdb.v1.SowRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SowResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getSowMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Queries and subscribes at one atomic point: subscribed, the query's frames, then live
     * events.
     * </pre>
     */
    public void sowAndSubscribe(io.sowdb.v1.SowAndSubscribeRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SowAndSubscribeResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getSowAndSubscribeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Subscribes without a query; with a bookmark, first replays the journal after it.
     * </pre>
     */
    public void subscribe(io.sowdb.v1.SubscribeRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SubscribeResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getSubscribeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Changes the filter and options of a live subscription.
     * </pre>
     */
    public void replaceSubscription(io.sowdb.v1.ReplaceSubscriptionRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ReplaceSubscriptionResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getReplaceSubscriptionMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes records by filter, by SowKeys or by data; returns how many were deleted.
     * </pre>
     */
    public void sowDelete(io.sowdb.v1.SowDeleteRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.SowDeleteResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSowDeleteMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Lists the configured topics with their record counts.
     * </pre>
     */
    public void listTopics(io.sowdb.v1.ListTopicsRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ListTopicsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListTopicsMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service SowService.
   * <pre>
   * The State-of-the-World service.
   * </pre>
   */
  public static final class SowServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<SowServiceBlockingV2Stub> {
    private SowServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SowServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SowServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Publishes batches of messages. Each request is one atomic batch for one topic and gets one
     * response, in order: the bookmarks assigned, or an error for that request alone (the stream
     * stays open).
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<io.sowdb.v1.PublishRequest, io.sowdb.v1.PublishResponse>
        publish() {
      return io.grpc.stub.ClientCalls.blockingBidiStreamingCall(
          getChannel(), getPublishMethod(), getCallOptions());
    }

    /**
     * <pre>
     * Queries the current state of one or more SOW topics: group_begin, record batches,
     * group_end.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, io.sowdb.v1.SowResponse>
        sow(io.sowdb.v1.SowRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getSowMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Queries and subscribes at one atomic point: subscribed, the query's frames, then live
     * events.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, io.sowdb.v1.SowAndSubscribeResponse>
        sowAndSubscribe(io.sowdb.v1.SowAndSubscribeRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getSowAndSubscribeMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Subscribes without a query; with a bookmark, first replays the journal after it.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, io.sowdb.v1.SubscribeResponse>
        subscribe(io.sowdb.v1.SubscribeRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getSubscribeMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes the filter and options of a live subscription.
     * </pre>
     */
    public io.sowdb.v1.ReplaceSubscriptionResponse replaceSubscription(io.sowdb.v1.ReplaceSubscriptionRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getReplaceSubscriptionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes records by filter, by SowKeys or by data; returns how many were deleted.
     * </pre>
     */
    public io.sowdb.v1.SowDeleteResponse sowDelete(io.sowdb.v1.SowDeleteRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getSowDeleteMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the configured topics with their record counts.
     * </pre>
     */
    public io.sowdb.v1.ListTopicsResponse listTopics(io.sowdb.v1.ListTopicsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListTopicsMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service SowService.
   * <pre>
   * The State-of-the-World service.
   * </pre>
   */
  public static final class SowServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<SowServiceBlockingStub> {
    private SowServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SowServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SowServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Queries the current state of one or more SOW topics: group_begin, record batches,
     * group_end.
     * </pre>
     */
    public java.util.Iterator<io.sowdb.v1.SowResponse> sow(
        io.sowdb.v1.SowRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getSowMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Queries and subscribes at one atomic point: subscribed, the query's frames, then live
     * events.
     * </pre>
     */
    public java.util.Iterator<io.sowdb.v1.SowAndSubscribeResponse> sowAndSubscribe(
        io.sowdb.v1.SowAndSubscribeRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getSowAndSubscribeMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Subscribes without a query; with a bookmark, first replays the journal after it.
     * </pre>
     */
    public java.util.Iterator<io.sowdb.v1.SubscribeResponse> subscribe(
        io.sowdb.v1.SubscribeRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getSubscribeMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Changes the filter and options of a live subscription.
     * </pre>
     */
    public io.sowdb.v1.ReplaceSubscriptionResponse replaceSubscription(io.sowdb.v1.ReplaceSubscriptionRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getReplaceSubscriptionMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes records by filter, by SowKeys or by data; returns how many were deleted.
     * </pre>
     */
    public io.sowdb.v1.SowDeleteResponse sowDelete(io.sowdb.v1.SowDeleteRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSowDeleteMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Lists the configured topics with their record counts.
     * </pre>
     */
    public io.sowdb.v1.ListTopicsResponse listTopics(io.sowdb.v1.ListTopicsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListTopicsMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service SowService.
   * <pre>
   * The State-of-the-World service.
   * </pre>
   */
  public static final class SowServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<SowServiceFutureStub> {
    private SowServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SowServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SowServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Changes the filter and options of a live subscription.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.ReplaceSubscriptionResponse> replaceSubscription(
        io.sowdb.v1.ReplaceSubscriptionRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getReplaceSubscriptionMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes records by filter, by SowKeys or by data; returns how many were deleted.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.SowDeleteResponse> sowDelete(
        io.sowdb.v1.SowDeleteRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSowDeleteMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Lists the configured topics with their record counts.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.ListTopicsResponse> listTopics(
        io.sowdb.v1.ListTopicsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListTopicsMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_SOW = 0;
  private static final int METHODID_SOW_AND_SUBSCRIBE = 1;
  private static final int METHODID_SUBSCRIBE = 2;
  private static final int METHODID_REPLACE_SUBSCRIPTION = 3;
  private static final int METHODID_SOW_DELETE = 4;
  private static final int METHODID_LIST_TOPICS = 5;
  private static final int METHODID_PUBLISH = 6;

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
        case METHODID_SOW:
          serviceImpl.sow((io.sowdb.v1.SowRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.SowResponse>) responseObserver);
          break;
        case METHODID_SOW_AND_SUBSCRIBE:
          serviceImpl.sowAndSubscribe((io.sowdb.v1.SowAndSubscribeRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.SowAndSubscribeResponse>) responseObserver);
          break;
        case METHODID_SUBSCRIBE:
          serviceImpl.subscribe((io.sowdb.v1.SubscribeRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.SubscribeResponse>) responseObserver);
          break;
        case METHODID_REPLACE_SUBSCRIPTION:
          serviceImpl.replaceSubscription((io.sowdb.v1.ReplaceSubscriptionRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.ReplaceSubscriptionResponse>) responseObserver);
          break;
        case METHODID_SOW_DELETE:
          serviceImpl.sowDelete((io.sowdb.v1.SowDeleteRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.SowDeleteResponse>) responseObserver);
          break;
        case METHODID_LIST_TOPICS:
          serviceImpl.listTopics((io.sowdb.v1.ListTopicsRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.ListTopicsResponse>) responseObserver);
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
        case METHODID_PUBLISH:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.publish(
              (io.grpc.stub.StreamObserver<io.sowdb.v1.PublishResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getPublishMethod(),
          io.grpc.stub.ServerCalls.asyncBidiStreamingCall(
            new MethodHandlers<
              io.sowdb.v1.PublishRequest,
              io.sowdb.v1.PublishResponse>(
                service, METHODID_PUBLISH)))
        .addMethod(
          getSowMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              io.sowdb.v1.SowRequest,
              io.sowdb.v1.SowResponse>(
                service, METHODID_SOW)))
        .addMethod(
          getSowAndSubscribeMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              io.sowdb.v1.SowAndSubscribeRequest,
              io.sowdb.v1.SowAndSubscribeResponse>(
                service, METHODID_SOW_AND_SUBSCRIBE)))
        .addMethod(
          getSubscribeMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              io.sowdb.v1.SubscribeRequest,
              io.sowdb.v1.SubscribeResponse>(
                service, METHODID_SUBSCRIBE)))
        .addMethod(
          getReplaceSubscriptionMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.ReplaceSubscriptionRequest,
              io.sowdb.v1.ReplaceSubscriptionResponse>(
                service, METHODID_REPLACE_SUBSCRIPTION)))
        .addMethod(
          getSowDeleteMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.SowDeleteRequest,
              io.sowdb.v1.SowDeleteResponse>(
                service, METHODID_SOW_DELETE)))
        .addMethod(
          getListTopicsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.ListTopicsRequest,
              io.sowdb.v1.ListTopicsResponse>(
                service, METHODID_LIST_TOPICS)))
        .build();
  }

  private static abstract class SowServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    SowServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return io.sowdb.v1.SowProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("SowService");
    }
  }

  private static final class SowServiceFileDescriptorSupplier
      extends SowServiceBaseDescriptorSupplier {
    SowServiceFileDescriptorSupplier() {}
  }

  private static final class SowServiceMethodDescriptorSupplier
      extends SowServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    SowServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (SowServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new SowServiceFileDescriptorSupplier())
              .addMethod(getPublishMethod())
              .addMethod(getSowMethod())
              .addMethod(getSowAndSubscribeMethod())
              .addMethod(getSubscribeMethod())
              .addMethod(getReplaceSubscriptionMethod())
              .addMethod(getSowDeleteMethod())
              .addMethod(getListTopicsMethod())
              .build();
        }
      }
    }
    return result;
  }
}
