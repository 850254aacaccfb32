package sowdb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/sowdb/sowdb/clients/go/sowdbpb/sowdb/v1"
)

// The servers of a client (SPEC §13, HA-5): one connection per server, and which of them is the
// primary.
//
// A client given one address has one node and never asks who is primary: it behaves exactly as a
// client of a lone server. Given a list, writes go to the primary, found by asking every server
// AdminService.ClusterStatus (each node answers with its own role and epoch first), or from a
// replica's refusal, which names the primary's address (FAILED_PRECONDITION, ErrorInfo metadata
// "primary"). A primary address that is not in the list is added.

// channel is one server: its address and the stubs of its services over its one connection.
type channel struct {
	address string
	conn    *grpc.ClientConn
	sow     pb.SowServiceClient
	admin   pb.AdminServiceClient
	health  healthpb.HealthClient
}

func newChannel(address string, dial []grpc.DialOption) (*channel, error) {
	conn, err := grpc.NewClient(strings.TrimPrefix(strings.TrimPrefix(address, "http://"), "https://"), dial...)
	if err != nil {
		return nil, &Error{Code: codes.InvalidArgument, Message: fmt.Sprintf("address %q: %v", address, err), Metadata: map[string]string{}, cause: err}
	}
	return &channel{address: address, conn: conn, sow: pb.NewSowServiceClient(conn), admin: pb.NewAdminServiceClient(conn), health: healthpb.NewHealthClient(conn)}, nil
}

// statusTimeout bounds one ClusterStatus question while looking for the primary.
const statusTimeout = 2 * time.Second

// retryPause is the pause between two rounds of questions, or before the next try of a call,
// so that a dead address is not hammered while an election runs.
const retryPause = 100 * time.Millisecond

// status is this node's own ClusterStatus row first, and the others it knows; empty when it is
// up but refuses to say (not an admin, a lone server); ok false when it does not answer.
func (ch *channel) status(ctx context.Context, timeout time.Duration) (rows []*pb.ClusterNode, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := ch.admin.ClusterStatus(ctx, &pb.ClusterStatusRequest{})
	if err == nil {
		return resp.GetNodes(), true
	}
	var e *Error
	errors.As(toError(ctx, err), &e)
	if isFailover(e) || e.Code == codes.DeadlineExceeded || e.Code == codes.Canceled {
		return nil, false
	}
	return nil, true
}

type nodes struct {
	dial     []grpc.DialOption
	mu       sync.Mutex
	channels []*channel
	primary  *channel
	next     int
	// subs is the node each live subscription of the client runs on (for ReplaceSubscription).
	subs map[string]*channel
}

func newNodes(addresses []string, dial []grpc.DialOption) (*nodes, error) {
	n := &nodes{dial: dial, subs: map[string]*channel{}}
	for _, a := range addresses {
		ch, err := newChannel(a, dial)
		if err != nil {
			n.close()
			return nil, err
		}
		n.channels = append(n.channels, ch)
	}
	n.next = rand.IntN(len(n.channels)) // spreads ReadAny
	return n, nil
}

// cluster is true with more than one server: writes look for the primary, failures are retried.
func (n *nodes) cluster() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.channels) > 1
}

// channel is the channel of address, added when the list does not have it.
func (n *nodes) channel(address string) *channel {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.channelLocked(address)
}

func (n *nodes) channelLocked(address string) *channel {
	for _, c := range n.channels {
		if c.address == address {
			return c
		}
	}
	ch, err := newChannel(address, n.dial)
	if err != nil {
		return n.channels[0]
	}
	n.channels = append(n.channels, ch)
	return ch
}

// rotation is the nodes in the order ReadAny tries them: a different first one each time.
func (n *nodes) rotation() []*channel {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := len(n.channels)
	start := n.next % k
	n.next++
	return append(append([]*channel{}, n.channels[start:]...), n.channels[:start]...)
}

func (n *nodes) known() *channel {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.primary
}

// learn records what a failed write taught: address is the primary (a replica named it), or,
// with "", the primary is unknown again.
func (n *nodes) learn(address string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if address == "" {
		n.primary = nil
	} else {
		n.primary = n.channelLocked(address)
	}
}

func (n *nodes) setPrimary(c *channel) {
	n.mu.Lock()
	n.primary = c
	n.mu.Unlock()
}

func (n *nodes) all() []*channel {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*channel{}, n.channels...)
}

// findPrimary is the primary: the one last found, else the node that ClusterStatus says leads
// at the highest epoch, asking every server at once, round after round until deadline. A write
// (probe) may also go to a node that answered without being primary: a replica refuses it
// naming the primary, which is how a list of replicas alone finds it.
func (n *nodes) findPrimary(ctx context.Context, deadline time.Time, probe bool) (*channel, error) {
	if p := n.known(); p != nil {
		return p, nil
	}
	chans := n.all()
	if len(chans) == 1 {
		return chans[0], nil
	}
	for {
		type answer struct {
			rows []*pb.ClusterNode
			ok   bool
		}
		answers := make([]answer, len(chans))
		var wg sync.WaitGroup
		timeout := min(statusTimeout, max(time.Millisecond, time.Until(deadline)))
		for i, c := range chans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rows, ok := c.status(ctx, timeout)
				answers[i] = answer{rows, ok}
			}()
		}
		wg.Wait()
		var best *pb.ClusterNode
		answered := -1
		for i, a := range answers {
			if a.ok && answered < 0 {
				answered = i
			}
			if len(a.rows) > 0 && a.rows[0].GetRole() == "primary" && (best == nil || a.rows[0].GetEpoch() > best.GetEpoch()) {
				best = a.rows[0]
			}
		}
		if best != nil && best.GetAddress() != "" {
			p := n.channel(best.GetAddress())
			n.setPrimary(p)
			return p, nil
		}
		if probe && answered >= 0 {
			return chans[answered], nil
		}
		if ctx.Err() != nil {
			return nil, toError(ctx, ctx.Err())
		}
		if time.Now().Add(retryPause).After(deadline) {
			addrs := make([]string, len(chans))
			for i, c := range chans {
				addrs[i] = c.address
			}
			return nil, &Error{Code: codes.Unavailable, Message: "no primary among " + strings.Join(addrs, ", ") + ": none said it was the primary", Metadata: map[string]string{}}
		}
		if err := pause(ctx, retryPause); err != nil {
			return nil, err
		}
		chans = n.all()
	}
}

// holding is a node that has applied bookmark (its own ClusterStatus row says so): the primary
// when primaryOnly, else any, in rotation order, round after round until deadline. A node that
// is up but does not say (ClusterStatus takes an admin with security on) is taken when no node
// says it holds the bookmark: resume.go checks it by what the node answers. nil: none by then.
func (n *nodes) holding(ctx context.Context, bookmark uint64, primaryOnly bool, deadline time.Time) *channel {
	for {
		var unsaid *channel
		for _, c := range n.rotation() {
			rows, ok := c.status(ctx, min(statusTimeout, max(time.Millisecond, time.Until(deadline))))
			if ok && len(rows) == 0 && unsaid == nil {
				unsaid = c
			}
			if len(rows) == 0 || (primaryOnly && rows[0].GetRole() != "primary") {
				continue
			}
			if rows[0].GetAppliedBookmark() >= bookmark {
				if rows[0].GetRole() == "primary" {
					n.setPrimary(c)
				}
				return c
			}
		}
		if unsaid != nil {
			return unsaid
		}
		if ctx.Err() != nil || time.Now().Add(retryPause).After(deadline) {
			return nil
		}
		if pause(ctx, retryPause) != nil {
			return nil
		}
	}
}

func (n *nodes) placed(subID string, c *channel) {
	n.mu.Lock()
	n.subs[subID] = c
	n.mu.Unlock()
}

func (n *nodes) ended(subID string, c *channel) {
	n.mu.Lock()
	if n.subs[subID] == c {
		delete(n.subs, subID)
	}
	n.mu.Unlock()
}

// subscriptionNode is the node a subscription of this client runs on (the primary or the first
// server when the client holds no such subscription: the server then answers NOT_FOUND).
func (n *nodes) subscriptionNode(subID string) *channel {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c, ok := n.subs[subID]; ok {
		return c
	}
	if n.primary != nil {
		return n.primary
	}
	return n.channels[0]
}

func (n *nodes) close() error {
	var first error
	for _, c := range n.all() {
		if err := c.conn.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// pause waits d, or returns the context's error when it ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return toError(ctx, ctx.Err())
	}
}
