package sowdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
)

// Failover of calls (SPEC §13, HA-5): which failures mean "the node is gone, or is not the
// primary (any more)", and the loops that retry a call on the primary found again, or on the
// next node, until the client's failover timeout.

// notPrimary is the ErrorInfo reason of a write refused by a replica (the server's NotPrimary).
const notPrimary = "NOT_PRIMARY"

// isFailover says whether e means the node cannot serve the call now while another node may: it
// is down or unreachable (Unavailable: grpc-go reports a reset connection so), a replica that
// refused a write (FAILED_PRECONDITION, reason NOT_PRIMARY), a primary past its fencing deadline
// or a node that knows no primary yet (Unavailable).
func isFailover(e *Error) bool {
	if e == nil {
		return false
	}
	switch e.Code {
	case codes.Unavailable:
		return true
	case codes.FailedPrecondition:
		return e.Reason == notPrimary
	}
	return false
}

// namedPrimary is the address a replica named as the primary when it refused a write ("": none).
func namedPrimary(e *Error) string {
	if e.Code == codes.FailedPrecondition && e.Reason == notPrimary {
		return e.Metadata["primary"]
	}
	return ""
}

// gaveUp is the error a call ends with when no node served it within the failover timeout.
func gaveUp(what string, timeout time.Duration, last *Error) *Error {
	return &Error{
		Code:            last.Code,
		Message:         fmt.Sprintf("%s: no server of the cluster served it within the failover timeout (%s); last error: %s", what, timeout, last.Message),
		FieldViolations: last.FieldViolations,
		Reason:          last.Reason,
		Metadata:        last.Metadata,
		cause:           last,
	}
}

// failedOn records what a failover failure of a call on ch teaches: the primary a replica named,
// or, when ch was the primary known, that it is not (any more).
func failedOn(n *nodes, ch *channel, e *Error) {
	if named := namedPrimary(e); named != "" {
		n.learn(named)
	} else if n.known() == ch {
		n.learn("")
	}
}

func asError(ctx context.Context, err error) *Error {
	var e *Error
	errors.As(toError(ctx, err), &e)
	return e
}

// onPrimary runs call on the primary (write: or on a node that may name it); in a cluster, a
// failover failure makes it find the primary again and try once more, until the failover timeout
// has passed, then it fails with gaveUp's error. A client of one server runs call once.
func onPrimary[R any](ctx context.Context, c *Client, what string, write bool, call func(*channel) (R, error)) (R, error) {
	var zero R
	deadline := time.Now().Add(c.settings.failoverTimeout)
	for {
		ch, err := c.nodes.findPrimary(ctx, deadline, write)
		if err != nil {
			return zero, err
		}
		r, err := call(ch)
		if err == nil {
			return r, nil
		}
		if final(err) {
			return zero, err
		}
		e := asError(ctx, err)
		if !c.nodes.cluster() || ctx.Err() != nil || !isFailover(e) {
			return zero, e
		}
		failedOn(c.nodes, ch, e)
		if time.Now().After(deadline) {
			return zero, gaveUp(what, c.settings.failoverTimeout, e)
		}
		if err := pause(ctx, retryPause); err != nil {
			return zero, err
		}
	}
}

// onReader runs the read call where ReadFrom sends it: on the primary (onPrimary), or on any
// node, trying the next on a failover failure until the timeout.
func onReader[R any](ctx context.Context, c *Client, what string, call func(*channel) (R, error)) (R, error) {
	if c.settings.readFrom == ReadPrimary || !c.nodes.cluster() {
		return onPrimary(ctx, c, what, false, call)
	}
	var zero R
	deadline := time.Now().Add(c.settings.failoverTimeout)
	for {
		var last *Error
		for _, ch := range c.nodes.rotation() {
			r, err := call(ch)
			if err == nil {
				return r, nil
			}
			if final(err) {
				return zero, err
			}
			e := asError(ctx, err)
			if ctx.Err() != nil || !isFailover(e) {
				return zero, e
			}
			last = e
		}
		if time.Now().After(deadline) {
			return zero, gaveUp(what, c.settings.failoverTimeout, last)
		}
		if err := pause(ctx, retryPause); err != nil {
			return zero, err
		}
	}
}

// final says err must not be retried on another node (stopRetry: part of a result delivered).
func final(err error) bool {
	var s *stopRetry
	return errors.As(err, &s)
}
