package io.sowdb.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.protobuf.StatusProto;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A refusal or failure reported by the server (or the transport), with the status's rich
 * details: the fields {@code google.rpc.BadRequest} names and {@code google.rpc.ErrorInfo}'s reason
 * and metadata (a filter's {@code column}, a replica's {@code primary}). Each status code a caller
 * may want to catch has its subclass ({@link InvalidArgument}, {@link Unauthenticated}, ...), as
 * in the Python SDK ({@code InvalidArgumentError}) and the Node SDK ({@code SowdbError.code}).
 */
public class SowdbException extends RuntimeException {
  /** A field the server named, and why. */
  public record FieldViolation(String field, String description) {}

  private final Status.Code code;
  private final String serverMessage;
  private final List<FieldViolation> fieldViolations;
  private final String reason;
  private final Map<String, String> metadata;

  public SowdbException(
      Status.Code code, String message, List<FieldViolation> violations, String reason, Map<String, String> metadata) {
    this(code, message, violations, reason, metadata, null);
  }

  SowdbException(
      Status.Code code,
      String message,
      List<FieldViolation> violations,
      String reason,
      Map<String, String> metadata,
      Throwable cause) {
    super(code + ": " + message, cause);
    this.code = code;
    this.serverMessage = message;
    this.fieldViolations = List.copyOf(violations);
    this.reason = reason;
    this.metadata = Map.copyOf(metadata);
  }

  /** The gRPC status code. */
  public Status.Code code() {
    return code;
  }

  /** The server's message, meant for a person. */
  public String serverMessage() {
    return serverMessage;
  }

  /** The (field, description) pairs of the status's BadRequest. */
  public List<FieldViolation> fieldViolations() {
    return fieldViolations;
  }

  /** The first request field the server named, or null. */
  public String field() {
    return fieldViolations.isEmpty() ? null : fieldViolations.get(0).field();
  }

  /** ErrorInfo's reason (e.g. {@code EXPRESSION_ERROR}), or "". */
  public String reason() {
    return reason;
  }

  /** ErrorInfo's metadata (e.g. {@code {"column": "7"}}). */
  public Map<String, String> metadata() {
    return metadata;
  }

  /** For an expression error: the 1-based column of the offending token, or null. */
  public Integer column() {
    String v = metadata.get("column");
    return v == null || v.isEmpty() ? null : Integer.valueOf(v);
  }

  public static final class InvalidArgument extends SowdbException {
    InvalidArgument(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  public static final class NotFound extends SowdbException {
    NotFound(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  public static final class FailedPrecondition extends SowdbException {
    FailedPrecondition(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  /** A bookmark older than the journal keeps; {@link #oldestBookmark()} says what it keeps. */
  public static final class OutOfRange extends SowdbException {
    OutOfRange(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }

    public Long oldestBookmark() {
      String v = metadata().get("oldest_bookmark");
      return v == null || v.isEmpty() ? null : Long.valueOf(v);
    }
  }

  public static final class ResourceExhausted extends SowdbException {
    ResourceExhausted(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  public static final class Unimplemented extends SowdbException {
    Unimplemented(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  public static final class Unavailable extends SowdbException {
    Unavailable(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  public static final class PermissionDenied extends SowdbException {
    PermissionDenied(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  public static final class Unauthenticated extends SowdbException {
    Unauthenticated(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  public static final class DeadlineExceeded extends SowdbException {
    DeadlineExceeded(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  /** The call was cancelled on this side (a closed subscription, a cancelled context). */
  public static final class Cancelled extends SowdbException {
    Cancelled(Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable t) {
      super(c, m, v, r, md, t);
    }
  }

  static SowdbException of(
      Status.Code c, String m, List<FieldViolation> v, String r, Map<String, String> md, Throwable cause) {
    return switch (c) {
      case INVALID_ARGUMENT -> new InvalidArgument(c, m, v, r, md, cause);
      case NOT_FOUND -> new NotFound(c, m, v, r, md, cause);
      case FAILED_PRECONDITION -> new FailedPrecondition(c, m, v, r, md, cause);
      case OUT_OF_RANGE -> new OutOfRange(c, m, v, r, md, cause);
      case RESOURCE_EXHAUSTED -> new ResourceExhausted(c, m, v, r, md, cause);
      case UNIMPLEMENTED -> new Unimplemented(c, m, v, r, md, cause);
      case UNAVAILABLE -> new Unavailable(c, m, v, r, md, cause);
      case PERMISSION_DENIED -> new PermissionDenied(c, m, v, r, md, cause);
      case UNAUTHENTICATED -> new Unauthenticated(c, m, v, r, md, cause);
      case DEADLINE_EXCEEDED -> new DeadlineExceeded(c, m, v, r, md, cause);
      case CANCELLED -> new Cancelled(c, m, v, r, md, cause);
      default -> new SowdbException(c, m, v, r, md, cause);
    };
  }

  /** The typed exception of a {@code google.rpc.Status} (as a PublishResponse carries one). */
  public static SowdbException fromStatus(com.google.rpc.Status status) {
    return fromStatus(status, null);
  }

  static SowdbException fromStatus(com.google.rpc.Status status, Throwable cause) {
    List<FieldViolation> violations = new ArrayList<>();
    String reason = "";
    Map<String, String> metadata = new LinkedHashMap<>();
    for (Any detail : status.getDetailsList()) {
      try {
        if (detail.is(BadRequest.class)) {
          for (var v : detail.unpack(BadRequest.class).getFieldViolationsList()) {
            violations.add(new FieldViolation(v.getField(), v.getDescription()));
          }
        } else if (detail.is(ErrorInfo.class)) {
          ErrorInfo info = detail.unpack(ErrorInfo.class);
          reason = info.getReason();
          metadata.putAll(info.getMetadataMap());
        }
      } catch (InvalidProtocolBufferException e) {
        // a detail that does not parse is left out: the code and message still say what failed
      }
    }
    return of(Status.fromCodeValue(status.getCode()).getCode(), status.getMessage(), violations, reason, metadata, cause);
  }

  /**
   * The typed exception of a failed call: the {@code grpc-status-details-bin} trailer when the
   * server sent one (its BadRequest and ErrorInfo read), else the bare status.
   */
  public static SowdbException from(Throwable t) {
    if (t instanceof SowdbException s) {
      return s;
    }
    Status status = Status.fromThrowable(t);
    Metadata trailers = Status.trailersFromThrowable(t);
    com.google.rpc.Status rich = trailers == null ? null : StatusProto.fromStatusAndTrailers(status, trailers);
    if (rich != null && !rich.getDetailsList().isEmpty()) {
      return fromStatus(rich, t);
    }
    String message = status.getDescription() == null ? "" : status.getDescription();
    return of(status.getCode(), message, List.of(), "", Map.of(), t);
  }
}
