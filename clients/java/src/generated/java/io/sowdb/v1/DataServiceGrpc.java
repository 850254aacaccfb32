package io.sowdb.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The data service.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class DataServiceGrpc {

  private DataServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "sowdb.v1.DataService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.OpenSnapshotRequest,
      io.sowdb.v1.OpenSnapshotResponse> getOpenSnapshotMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "OpenSnapshot",
      requestType = io.sowdb.v1.OpenSnapshotRequest.class,
      responseType = io.sowdb.v1.OpenSnapshotResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.OpenSnapshotRequest,
      io.sowdb.v1.OpenSnapshotResponse> getOpenSnapshotMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.OpenSnapshotRequest, io.sowdb.v1.OpenSnapshotResponse> getOpenSnapshotMethod;
    if ((getOpenSnapshotMethod = DataServiceGrpc.getOpenSnapshotMethod) == null) {
      synchronized (DataServiceGrpc.class) {
        if ((getOpenSnapshotMethod = DataServiceGrpc.getOpenSnapshotMethod) == null) {
          DataServiceGrpc.getOpenSnapshotMethod = getOpenSnapshotMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.OpenSnapshotRequest, io.sowdb.v1.OpenSnapshotResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "OpenSnapshot"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.OpenSnapshotRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.OpenSnapshotResponse.getDefaultInstance()))
              .setSchemaDescriptor(new DataServiceMethodDescriptorSupplier("OpenSnapshot"))
              .build();
        }
      }
    }
    return getOpenSnapshotMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.ReadSnapshotRequest,
      io.sowdb.v1.ReadSnapshotResponse> getReadSnapshotMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ReadSnapshot",
      requestType = io.sowdb.v1.ReadSnapshotRequest.class,
      responseType = io.sowdb.v1.ReadSnapshotResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.ReadSnapshotRequest,
      io.sowdb.v1.ReadSnapshotResponse> getReadSnapshotMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.ReadSnapshotRequest, io.sowdb.v1.ReadSnapshotResponse> getReadSnapshotMethod;
    if ((getReadSnapshotMethod = DataServiceGrpc.getReadSnapshotMethod) == null) {
      synchronized (DataServiceGrpc.class) {
        if ((getReadSnapshotMethod = DataServiceGrpc.getReadSnapshotMethod) == null) {
          DataServiceGrpc.getReadSnapshotMethod = getReadSnapshotMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.ReadSnapshotRequest, io.sowdb.v1.ReadSnapshotResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ReadSnapshot"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ReadSnapshotRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ReadSnapshotResponse.getDefaultInstance()))
              .setSchemaDescriptor(new DataServiceMethodDescriptorSupplier("ReadSnapshot"))
              .build();
        }
      }
    }
    return getReadSnapshotMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.CloseSnapshotRequest,
      io.sowdb.v1.CloseSnapshotResponse> getCloseSnapshotMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CloseSnapshot",
      requestType = io.sowdb.v1.CloseSnapshotRequest.class,
      responseType = io.sowdb.v1.CloseSnapshotResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.CloseSnapshotRequest,
      io.sowdb.v1.CloseSnapshotResponse> getCloseSnapshotMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.CloseSnapshotRequest, io.sowdb.v1.CloseSnapshotResponse> getCloseSnapshotMethod;
    if ((getCloseSnapshotMethod = DataServiceGrpc.getCloseSnapshotMethod) == null) {
      synchronized (DataServiceGrpc.class) {
        if ((getCloseSnapshotMethod = DataServiceGrpc.getCloseSnapshotMethod) == null) {
          DataServiceGrpc.getCloseSnapshotMethod = getCloseSnapshotMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.CloseSnapshotRequest, io.sowdb.v1.CloseSnapshotResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CloseSnapshot"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.CloseSnapshotRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.CloseSnapshotResponse.getDefaultInstance()))
              .setSchemaDescriptor(new DataServiceMethodDescriptorSupplier("CloseSnapshot"))
              .build();
        }
      }
    }
    return getCloseSnapshotMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.ReadJournalRequest,
      io.sowdb.v1.ReadJournalResponse> getReadJournalMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ReadJournal",
      requestType = io.sowdb.v1.ReadJournalRequest.class,
      responseType = io.sowdb.v1.ReadJournalResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.ReadJournalRequest,
      io.sowdb.v1.ReadJournalResponse> getReadJournalMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.ReadJournalRequest, io.sowdb.v1.ReadJournalResponse> getReadJournalMethod;
    if ((getReadJournalMethod = DataServiceGrpc.getReadJournalMethod) == null) {
      synchronized (DataServiceGrpc.class) {
        if ((getReadJournalMethod = DataServiceGrpc.getReadJournalMethod) == null) {
          DataServiceGrpc.getReadJournalMethod = getReadJournalMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.ReadJournalRequest, io.sowdb.v1.ReadJournalResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ReadJournal"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ReadJournalRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.ReadJournalResponse.getDefaultInstance()))
              .setSchemaDescriptor(new DataServiceMethodDescriptorSupplier("ReadJournal"))
              .build();
        }
      }
    }
    return getReadJournalMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.DescribeJournalRequest,
      io.sowdb.v1.DescribeJournalResponse> getDescribeJournalMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DescribeJournal",
      requestType = io.sowdb.v1.DescribeJournalRequest.class,
      responseType = io.sowdb.v1.DescribeJournalResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.DescribeJournalRequest,
      io.sowdb.v1.DescribeJournalResponse> getDescribeJournalMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.DescribeJournalRequest, io.sowdb.v1.DescribeJournalResponse> getDescribeJournalMethod;
    if ((getDescribeJournalMethod = DataServiceGrpc.getDescribeJournalMethod) == null) {
      synchronized (DataServiceGrpc.class) {
        if ((getDescribeJournalMethod = DataServiceGrpc.getDescribeJournalMethod) == null) {
          DataServiceGrpc.getDescribeJournalMethod = getDescribeJournalMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.DescribeJournalRequest, io.sowdb.v1.DescribeJournalResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DescribeJournal"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.DescribeJournalRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.DescribeJournalResponse.getDefaultInstance()))
              .setSchemaDescriptor(new DataServiceMethodDescriptorSupplier("DescribeJournal"))
              .build();
        }
      }
    }
    return getDescribeJournalMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.StageWriteRequest,
      io.sowdb.v1.StageWriteResponse> getStageWriteMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "StageWrite",
      requestType = io.sowdb.v1.StageWriteRequest.class,
      responseType = io.sowdb.v1.StageWriteResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.CLIENT_STREAMING)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.StageWriteRequest,
      io.sowdb.v1.StageWriteResponse> getStageWriteMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.StageWriteRequest, io.sowdb.v1.StageWriteResponse> getStageWriteMethod;
    if ((getStageWriteMethod = DataServiceGrpc.getStageWriteMethod) == null) {
      synchronized (DataServiceGrpc.class) {
        if ((getStageWriteMethod = DataServiceGrpc.getStageWriteMethod) == null) {
          DataServiceGrpc.getStageWriteMethod = getStageWriteMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.StageWriteRequest, io.sowdb.v1.StageWriteResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.CLIENT_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "StageWrite"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.StageWriteRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.StageWriteResponse.getDefaultInstance()))
              .setSchemaDescriptor(new DataServiceMethodDescriptorSupplier("StageWrite"))
              .build();
        }
      }
    }
    return getStageWriteMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.CommitStagesRequest,
      io.sowdb.v1.CommitStagesResponse> getCommitStagesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CommitStages",
      requestType = io.sowdb.v1.CommitStagesRequest.class,
      responseType = io.sowdb.v1.CommitStagesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.CommitStagesRequest,
      io.sowdb.v1.CommitStagesResponse> getCommitStagesMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.CommitStagesRequest, io.sowdb.v1.CommitStagesResponse> getCommitStagesMethod;
    if ((getCommitStagesMethod = DataServiceGrpc.getCommitStagesMethod) == null) {
      synchronized (DataServiceGrpc.class) {
        if ((getCommitStagesMethod = DataServiceGrpc.getCommitStagesMethod) == null) {
          DataServiceGrpc.getCommitStagesMethod = getCommitStagesMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.CommitStagesRequest, io.sowdb.v1.CommitStagesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CommitStages"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.CommitStagesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.CommitStagesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new DataServiceMethodDescriptorSupplier("CommitStages"))
              .build();
        }
      }
    }
    return getCommitStagesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<io.sowdb.v1.AbortStagesRequest,
      io.sowdb.v1.AbortStagesResponse> getAbortStagesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "AbortStages",
      requestType = io.sowdb.v1.AbortStagesRequest.class,
      responseType = io.sowdb.v1.AbortStagesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<io.sowdb.v1.AbortStagesRequest,
      io.sowdb.v1.AbortStagesResponse> getAbortStagesMethod() {
    io.grpc.MethodDescriptor<io.sowdb.v1.AbortStagesRequest, io.sowdb.v1.AbortStagesResponse> getAbortStagesMethod;
    if ((getAbortStagesMethod = DataServiceGrpc.getAbortStagesMethod) == null) {
      synchronized (DataServiceGrpc.class) {
        if ((getAbortStagesMethod = DataServiceGrpc.getAbortStagesMethod) == null) {
          DataServiceGrpc.getAbortStagesMethod = getAbortStagesMethod =
              io.grpc.MethodDescriptor.<io.sowdb.v1.AbortStagesRequest, io.sowdb.v1.AbortStagesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "AbortStages"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.AbortStagesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  io.sowdb.v1.AbortStagesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new DataServiceMethodDescriptorSupplier("AbortStages"))
              .build();
        }
      }
    }
    return getAbortStagesMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static DataServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<DataServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<DataServiceStub>() {
        @java.lang.Override
        public DataServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new DataServiceStub(channel, callOptions);
        }
      };
    return DataServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static DataServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<DataServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<DataServiceBlockingV2Stub>() {
        @java.lang.Override
        public DataServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new DataServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return DataServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static DataServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<DataServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<DataServiceBlockingStub>() {
        @java.lang.Override
        public DataServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new DataServiceBlockingStub(channel, callOptions);
        }
      };
    return DataServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static DataServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<DataServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<DataServiceFutureStub>() {
        @java.lang.Override
        public DataServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new DataServiceFutureStub(channel, callOptions);
        }
      };
    return DataServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The data service.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * Pins the records of a query (topic or regex, filter, optional historical bookmark) at one
     * point of the total order and keeps them for a lease, so that N readers can each read a slice
     * of the same result, and a reader that fails can read its slice again.
     * </pre>
     */
    default void openSnapshot(io.sowdb.v1.OpenSnapshotRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.OpenSnapshotResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getOpenSnapshotMethod(), responseObserver);
    }

    /**
     * <pre>
     * Reads the i-th of n contiguous slices of a snapshot's records, in the snapshot's fixed
     * order; renews the lease. The union of the n slices is the whole snapshot, each record once.
     * </pre>
     */
    default void readSnapshot(io.sowdb.v1.ReadSnapshotRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ReadSnapshotResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReadSnapshotMethod(), responseObserver);
    }

    /**
     * <pre>
     * Releases a snapshot before its lease ends.
     * </pre>
     */
    default void closeSnapshot(io.sowdb.v1.CloseSnapshotRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.CloseSnapshotResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCloseSnapshotMethod(), responseObserver);
    }

    /**
     * <pre>
     * Reads the journal entries after one bookmark up to another, in bookmark order.
     * </pre>
     */
    default void readJournal(io.sowdb.v1.ReadJournalRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ReadJournalResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReadJournalMethod(), responseObserver);
    }

    /**
     * <pre>
     * The retained journal's range, and where a read of at most N matching entries would end.
     * </pre>
     */
    default void describeJournal(io.sowdb.v1.DescribeJournalRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.DescribeJournalResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDescribeJournalMethod(), responseObserver);
    }

    /**
     * <pre>
     * Stages messages for a later CommitStages: validated now (a bad message is refused naming
     * it), applied only when committed. The first request names the stage; the last one says it
     * is complete (a call that ends otherwise leaves no stage).
     * </pre>
     */
    default io.grpc.stub.StreamObserver<io.sowdb.v1.StageWriteRequest> stageWrite(
        io.grpc.stub.StreamObserver<io.sowdb.v1.StageWriteResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getStageWriteMethod(), responseObserver);
    }

    /**
     * <pre>
     * Applies exactly the named stages to their topic as one atomic batch: one WriteBatch,
     * contiguous bookmarks, one place in the total order. With a producer id and sequence (J-4),
     * a commit whose sequence is not above the producer's last one is acknowledged as a
     * duplicate without being applied (its stages are discarded).
     * </pre>
     */
    default void commitStages(io.sowdb.v1.CommitStagesRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.CommitStagesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCommitStagesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Discards stages, by id or by id prefix.
     * </pre>
     */
    default void abortStages(io.sowdb.v1.AbortStagesRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.AbortStagesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAbortStagesMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service DataService.
   * <pre>
   * The data service.
   * </pre>
   */
  public static abstract class DataServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return DataServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service DataService.
   * <pre>
   * The data service.
   * </pre>
   */
  public static final class DataServiceStub
      extends io.grpc.stub.AbstractAsyncStub<DataServiceStub> {
    private DataServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected DataServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new DataServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Pins the records of a query (topic or regex, filter, optional historical bookmark) at one
     * point of the total order and keeps them for a lease, so that N readers can each read a slice
     * of the same result, and a reader that fails can read its slice again.
     * </pre>
     */
    public void openSnapshot(io.sowdb.v1.OpenSnapshotRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.OpenSnapshotResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getOpenSnapshotMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Reads the i-th of n contiguous slices of a snapshot's records, in the snapshot's fixed
     * order; renews the lease. The union of the n slices is the whole snapshot, each record once.
     * </pre>
     */
    public void readSnapshot(io.sowdb.v1.ReadSnapshotRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ReadSnapshotResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getReadSnapshotMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Releases a snapshot before its lease ends.
     * </pre>
     */
    public void closeSnapshot(io.sowdb.v1.CloseSnapshotRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.CloseSnapshotResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCloseSnapshotMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Reads the journal entries after one bookmark up to another, in bookmark order.
     * </pre>
     */
    public void readJournal(io.sowdb.v1.ReadJournalRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.ReadJournalResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getReadJournalMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * The retained journal's range, and where a read of at most N matching entries would end.
     * </pre>
     */
    public void describeJournal(io.sowdb.v1.DescribeJournalRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.DescribeJournalResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDescribeJournalMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Stages messages for a later CommitStages: validated now (a bad message is refused naming
     * it), applied only when committed. The first request names the stage; the last one says it
     * is complete (a call that ends otherwise leaves no stage).
     * </pre>
     */
    public io.grpc.stub.StreamObserver<io.sowdb.v1.StageWriteRequest> stageWrite(
        io.grpc.stub.StreamObserver<io.sowdb.v1.StageWriteResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncClientStreamingCall(
          getChannel().newCall(getStageWriteMethod(), getCallOptions()), responseObserver);
    }

    /**
     * <pre>
     * Applies exactly the named stages to their topic as one atomic batch: one WriteBatch,
     * contiguous bookmarks, one place in the total order. With a producer id and sequence (J-4),
     * a commit whose sequence is not above the producer's last one is acknowledged as a
     * duplicate without being applied (its stages are discarded).
     * </pre>
     */
    public void commitStages(io.sowdb.v1.CommitStagesRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.CommitStagesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCommitStagesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Discards stages, by id or by id prefix.
     * </pre>
     */
    public void abortStages(io.sowdb.v1.AbortStagesRequest request,
        io.grpc.stub.StreamObserver<io.sowdb.v1.AbortStagesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAbortStagesMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service DataService.
   * <pre>
   * The data service.
   * </pre>
   */
  public static final class DataServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<DataServiceBlockingV2Stub> {
    private DataServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected DataServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new DataServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Pins the records of a query (topic or regex, filter, optional historical bookmark) at one
     * point of the total order and keeps them for a lease, so that N readers can each read a slice
     * of the same result, and a reader that fails can read its slice again.
     * </pre>
     */
    public io.sowdb.v1.OpenSnapshotResponse openSnapshot(io.sowdb.v1.OpenSnapshotRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getOpenSnapshotMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reads the i-th of n contiguous slices of a snapshot's records, in the snapshot's fixed
     * order; renews the lease. The union of the n slices is the whole snapshot, each record once.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, io.sowdb.v1.ReadSnapshotResponse>
        readSnapshot(io.sowdb.v1.ReadSnapshotRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getReadSnapshotMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Releases a snapshot before its lease ends.
     * </pre>
     */
    public io.sowdb.v1.CloseSnapshotResponse closeSnapshot(io.sowdb.v1.CloseSnapshotRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCloseSnapshotMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reads the journal entries after one bookmark up to another, in bookmark order.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, io.sowdb.v1.ReadJournalResponse>
        readJournal(io.sowdb.v1.ReadJournalRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getReadJournalMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The retained journal's range, and where a read of at most N matching entries would end.
     * </pre>
     */
    public io.sowdb.v1.DescribeJournalResponse describeJournal(io.sowdb.v1.DescribeJournalRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getDescribeJournalMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Stages messages for a later CommitStages: validated now (a bad message is refused naming
     * it), applied only when committed. The first request names the stage; the last one says it
     * is complete (a call that ends otherwise leaves no stage).
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<io.sowdb.v1.StageWriteRequest, io.sowdb.v1.StageWriteResponse>
        stageWrite() {
      return io.grpc.stub.ClientCalls.blockingClientStreamingCall(
          getChannel(), getStageWriteMethod(), getCallOptions());
    }

    /**
     * <pre>
     * Applies exactly the named stages to their topic as one atomic batch: one WriteBatch,
     * contiguous bookmarks, one place in the total order. With a producer id and sequence (J-4),
     * a commit whose sequence is not above the producer's last one is acknowledged as a
     * duplicate without being applied (its stages are discarded).
     * </pre>
     */
    public io.sowdb.v1.CommitStagesResponse commitStages(io.sowdb.v1.CommitStagesRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCommitStagesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Discards stages, by id or by id prefix.
     * </pre>
     */
    public io.sowdb.v1.AbortStagesResponse abortStages(io.sowdb.v1.AbortStagesRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getAbortStagesMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service DataService.
   * <pre>
   * The data service.
   * </pre>
   */
  public static final class DataServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<DataServiceBlockingStub> {
    private DataServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected DataServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new DataServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Pins the records of a query (topic or regex, filter, optional historical bookmark) at one
     * point of the total order and keeps them for a lease, so that N readers can each read a slice
     * of the same result, and a reader that fails can read its slice again.
     * </pre>
     */
    public io.sowdb.v1.OpenSnapshotResponse openSnapshot(io.sowdb.v1.OpenSnapshotRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getOpenSnapshotMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reads the i-th of n contiguous slices of a snapshot's records, in the snapshot's fixed
     * order; renews the lease. The union of the n slices is the whole snapshot, each record once.
     * </pre>
     */
    public java.util.Iterator<io.sowdb.v1.ReadSnapshotResponse> readSnapshot(
        io.sowdb.v1.ReadSnapshotRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getReadSnapshotMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Releases a snapshot before its lease ends.
     * </pre>
     */
    public io.sowdb.v1.CloseSnapshotResponse closeSnapshot(io.sowdb.v1.CloseSnapshotRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCloseSnapshotMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reads the journal entries after one bookmark up to another, in bookmark order.
     * </pre>
     */
    public java.util.Iterator<io.sowdb.v1.ReadJournalResponse> readJournal(
        io.sowdb.v1.ReadJournalRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getReadJournalMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The retained journal's range, and where a read of at most N matching entries would end.
     * </pre>
     */
    public io.sowdb.v1.DescribeJournalResponse describeJournal(io.sowdb.v1.DescribeJournalRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDescribeJournalMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Applies exactly the named stages to their topic as one atomic batch: one WriteBatch,
     * contiguous bookmarks, one place in the total order. With a producer id and sequence (J-4),
     * a commit whose sequence is not above the producer's last one is acknowledged as a
     * duplicate without being applied (its stages are discarded).
     * </pre>
     */
    public io.sowdb.v1.CommitStagesResponse commitStages(io.sowdb.v1.CommitStagesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCommitStagesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Discards stages, by id or by id prefix.
     * </pre>
     */
    public io.sowdb.v1.AbortStagesResponse abortStages(io.sowdb.v1.AbortStagesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAbortStagesMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service DataService.
   * <pre>
   * The data service.
   * </pre>
   */
  public static final class DataServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<DataServiceFutureStub> {
    private DataServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected DataServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new DataServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Pins the records of a query (topic or regex, filter, optional historical bookmark) at one
     * point of the total order and keeps them for a lease, so that N readers can each read a slice
     * of the same result, and a reader that fails can read its slice again.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.OpenSnapshotResponse> openSnapshot(
        io.sowdb.v1.OpenSnapshotRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getOpenSnapshotMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Releases a snapshot before its lease ends.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.CloseSnapshotResponse> closeSnapshot(
        io.sowdb.v1.CloseSnapshotRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCloseSnapshotMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The retained journal's range, and where a read of at most N matching entries would end.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.DescribeJournalResponse> describeJournal(
        io.sowdb.v1.DescribeJournalRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDescribeJournalMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Applies exactly the named stages to their topic as one atomic batch: one WriteBatch,
     * contiguous bookmarks, one place in the total order. With a producer id and sequence (J-4),
     * a commit whose sequence is not above the producer's last one is acknowledged as a
     * duplicate without being applied (its stages are discarded).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.CommitStagesResponse> commitStages(
        io.sowdb.v1.CommitStagesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCommitStagesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Discards stages, by id or by id prefix.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<io.sowdb.v1.AbortStagesResponse> abortStages(
        io.sowdb.v1.AbortStagesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAbortStagesMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_OPEN_SNAPSHOT = 0;
  private static final int METHODID_READ_SNAPSHOT = 1;
  private static final int METHODID_CLOSE_SNAPSHOT = 2;
  private static final int METHODID_READ_JOURNAL = 3;
  private static final int METHODID_DESCRIBE_JOURNAL = 4;
  private static final int METHODID_COMMIT_STAGES = 5;
  private static final int METHODID_ABORT_STAGES = 6;
  private static final int METHODID_STAGE_WRITE = 7;

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
        case METHODID_OPEN_SNAPSHOT:
          serviceImpl.openSnapshot((io.sowdb.v1.OpenSnapshotRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.OpenSnapshotResponse>) responseObserver);
          break;
        case METHODID_READ_SNAPSHOT:
          serviceImpl.readSnapshot((io.sowdb.v1.ReadSnapshotRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.ReadSnapshotResponse>) responseObserver);
          break;
        case METHODID_CLOSE_SNAPSHOT:
          serviceImpl.closeSnapshot((io.sowdb.v1.CloseSnapshotRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.CloseSnapshotResponse>) responseObserver);
          break;
        case METHODID_READ_JOURNAL:
          serviceImpl.readJournal((io.sowdb.v1.ReadJournalRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.ReadJournalResponse>) responseObserver);
          break;
        case METHODID_DESCRIBE_JOURNAL:
          serviceImpl.describeJournal((io.sowdb.v1.DescribeJournalRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.DescribeJournalResponse>) responseObserver);
          break;
        case METHODID_COMMIT_STAGES:
          serviceImpl.commitStages((io.sowdb.v1.CommitStagesRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.CommitStagesResponse>) responseObserver);
          break;
        case METHODID_ABORT_STAGES:
          serviceImpl.abortStages((io.sowdb.v1.AbortStagesRequest) request,
              (io.grpc.stub.StreamObserver<io.sowdb.v1.AbortStagesResponse>) responseObserver);
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
        case METHODID_STAGE_WRITE:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.stageWrite(
              (io.grpc.stub.StreamObserver<io.sowdb.v1.StageWriteResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getOpenSnapshotMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.OpenSnapshotRequest,
              io.sowdb.v1.OpenSnapshotResponse>(
                service, METHODID_OPEN_SNAPSHOT)))
        .addMethod(
          getReadSnapshotMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              io.sowdb.v1.ReadSnapshotRequest,
              io.sowdb.v1.ReadSnapshotResponse>(
                service, METHODID_READ_SNAPSHOT)))
        .addMethod(
          getCloseSnapshotMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.CloseSnapshotRequest,
              io.sowdb.v1.CloseSnapshotResponse>(
                service, METHODID_CLOSE_SNAPSHOT)))
        .addMethod(
          getReadJournalMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              io.sowdb.v1.ReadJournalRequest,
              io.sowdb.v1.ReadJournalResponse>(
                service, METHODID_READ_JOURNAL)))
        .addMethod(
          getDescribeJournalMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.DescribeJournalRequest,
              io.sowdb.v1.DescribeJournalResponse>(
                service, METHODID_DESCRIBE_JOURNAL)))
        .addMethod(
          getStageWriteMethod(),
          io.grpc.stub.ServerCalls.asyncClientStreamingCall(
            new MethodHandlers<
              io.sowdb.v1.StageWriteRequest,
              io.sowdb.v1.StageWriteResponse>(
                service, METHODID_STAGE_WRITE)))
        .addMethod(
          getCommitStagesMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.CommitStagesRequest,
              io.sowdb.v1.CommitStagesResponse>(
                service, METHODID_COMMIT_STAGES)))
        .addMethod(
          getAbortStagesMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              io.sowdb.v1.AbortStagesRequest,
              io.sowdb.v1.AbortStagesResponse>(
                service, METHODID_ABORT_STAGES)))
        .build();
  }

  private static abstract class DataServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    DataServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return io.sowdb.v1.DataProto.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("DataService");
    }
  }

  private static final class DataServiceFileDescriptorSupplier
      extends DataServiceBaseDescriptorSupplier {
    DataServiceFileDescriptorSupplier() {}
  }

  private static final class DataServiceMethodDescriptorSupplier
      extends DataServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    DataServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (DataServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new DataServiceFileDescriptorSupplier())
              .addMethod(getOpenSnapshotMethod())
              .addMethod(getReadSnapshotMethod())
              .addMethod(getCloseSnapshotMethod())
              .addMethod(getReadJournalMethod())
              .addMethod(getDescribeJournalMethod())
              .addMethod(getStageWriteMethod())
              .addMethod(getCommitStagesMethod())
              .addMethod(getAbortStagesMethod())
              .build();
        }
      }
    }
    return result;
  }
}
