package sowdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FieldViolation is one google.rpc.BadRequest.FieldViolation: the request field at fault and why.
type FieldViolation struct {
	Field       string
	Description string
}

// Error is a refusal or failure reported by the server, or by the transport (Unavailable,
// DeadlineExceeded, Canceled). Every call of the client returns its failures as an *Error, so
// that errors.As(err, &e) gives the details the server put in the status:
//
//	var e *sowdb.Error
//	if errors.As(err, &e) { fmt.Println(e.CodeName(), e.Field(), e.Column(), e.Message) }
//	// INVALID_ARGUMENT filter 7 expected an operand at column 7 (end of input)
type Error struct {
	// Code is the gRPC status code (status.Code(err) gives it too).
	Code codes.Code
	// Message is the server's text for a person.
	Message string
	// FieldViolations are the (field, description) pairs of google.rpc.BadRequest.
	FieldViolations []FieldViolation
	// Reason is google.rpc.ErrorInfo.reason (e.g. EXPRESSION_ERROR), or "".
	Reason string
	// Metadata is google.rpc.ErrorInfo.metadata (e.g. column, message_index, oldest_bookmark).
	Metadata map[string]string
	cause    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("sowdb: %s: %s", CodeName(e.Code), e.Message)
}

// Unwrap gives the error this one was made from (the gRPC status error, a context error).
func (e *Error) Unwrap() error { return e.cause }

// GRPCStatus lets status.FromError and status.Code read an *Error as the status it came from.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// CodeName is the code as the server and the other SDKs spell it (INVALID_ARGUMENT).
func (e *Error) CodeName() string { return CodeName(e.Code) }

// Field is the first request field the server named (filter, batch_size, messages[3]), or "".
func (e *Error) Field() string {
	if len(e.FieldViolations) == 0 {
		return ""
	}
	return e.FieldViolations[0].Field
}

// Column is, for an expression error (filter, order_by, ...), the 1-based column of the
// offending token; 0 when the server named none.
func (e *Error) Column() int {
	c, _ := strconv.Atoi(e.Metadata["column"])
	return c
}

// OldestBookmark is, for OutOfRange, the oldest bookmark the server still has (ok false: none).
func (e *Error) OldestBookmark() (bookmark uint64, ok bool) {
	b, err := strconv.ParseUint(e.Metadata["oldest_bookmark"], 10, 64)
	return b, err == nil
}

// PublishError is a publish request the server refused: nothing of that request, and nothing
// after it, was stored (every request carries stop_on_error, so the server applies no later
// request of the call even when the client had already sent it); the Stored messages before it
// are stored.
type PublishError struct {
	// Err is the refusal, with the status's details (Err.Code, Err.Field(), ...).
	Err *Error
	// BatchIndex is the refused request's index among those the call sent (0-based).
	BatchIndex int
	// MessageIndex is the offending message's index in the whole call (-1: none named).
	MessageIndex int
	// Stored counts the messages stored before the refused request, in order.
	Stored int
	// FirstBookmark and LastBookmark are those of the messages stored before it (0: none).
	FirstBookmark, LastBookmark uint64
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("%s (request %d of the publish; %d messages stored before it)", e.Err.Error(), e.BatchIndex, e.Stored)
}

// Unwrap gives the *Error, so that errors.As finds both types.
func (e *PublishError) Unwrap() error { return e.Err }

var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
	codes.Unauthenticated: "UNAUTHENTICATED",
}

// CodeName spells a gRPC code as the server, the specification and the other SDKs do.
func CodeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "UNKNOWN"
}

// CodeOf is the code of a name that CodeName gives (Unknown for any other).
func CodeOf(name string) codes.Code {
	for c, n := range codeNames {
		if n == name {
			return c
		}
	}
	return codes.Unknown
}

// FromStatus is the *Error of a google.rpc.Status (as in a PublishResponse).
func FromStatus(st *spb.Status) *Error {
	return fromGRPC(status.FromProto(st), nil)
}

// shutDownUnderTheCall says what a Canceled sent by the server means: gRPC core ends the calls
// that reached a stopping server before a handler with CANCELLED (grpc/grpc#41785) where
// UNAVAILABLE is meant, and sowd never ends a call with CANCELLED itself. It is reported as
// Unavailable, so that a caller retries it and a server list moves on; a Canceled made by this
// side (its context) stays Canceled.
const shutDownUnderTheCall = "the server dropped the call as it shut down, before handling it; retry (in a cluster, on another node)"

// toError turns anything a call returned into an *Error (nil stays nil). ctx is the call's:
// when it is done, the failure is its cancellation or deadline.
func toError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if ctx != nil && ctx.Err() != nil {
		code := codes.Canceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			code = codes.DeadlineExceeded
		}
		return &Error{Code: code, Message: ctx.Err().Error(), Metadata: map[string]string{}, cause: err}
	}
	st, ok := status.FromError(err)
	if !ok {
		return &Error{Code: codes.Unknown, Message: err.Error(), Metadata: map[string]string{}, cause: err}
	}
	out := fromGRPC(st, err)
	if out.Code == codes.Canceled {
		out.Code, out.Message = codes.Unavailable, shutDownUnderTheCall+" ["+out.Message+"]"
	}
	return out
}

func fromGRPC(st *status.Status, cause error) *Error {
	e := &Error{Code: st.Code(), Message: st.Message(), Metadata: map[string]string{}, cause: cause}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.BadRequest:
			for _, v := range d.GetFieldViolations() {
				e.FieldViolations = append(e.FieldViolations, FieldViolation{Field: v.GetField(), Description: v.GetDescription()})
			}
		case *errdetails.ErrorInfo:
			e.Reason = d.GetReason()
			for k, v := range d.GetMetadata() {
				e.Metadata[k] = v
			}
		}
	}
	return e
}
