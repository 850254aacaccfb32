package sowdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/sowdb/sowdb/clients/go/sowdbpb/sowdb/v1"
)

// SowAndSubscribe queries and subscribes at one atomic point (S-1): SubscribedEvent,
// GroupBeginEvent, SowEvent batches, GroupEndEvent, then live PublishEvent and OofEvent (feed
// them to a Mirror). The stream ends when ctx ends (no error then) or with one error; leaving
// the loop cancels it, and the server drops the subscription.
//
// In a cluster it resumes by itself once its query is delivered: from the last bookmark it
// delivered, on a node that has applied it, as of that bookmark (H-3: the topic needs history;
// a query with TopN, SkipN, Grouping or Conflation ends with the error instead).
func (c *Client) SowAndSubscribe(ctx context.Context, topic string, q Query, o SubscribeOptions) iter.Seq2[Event, error] {
	base := &pb.SowAndSubscribeRequest{Query: q.toPb(topic), Options: o.toPb(), SubId: o.SubID}
	open := func(ctx context.Context, ch *channel, bookmark, subID string) (func() (streamResponse, error), error) {
		req := base
		if bookmark != "" {
			query := proto.Clone(base.Query).(*pb.SowRequest)
			query.Bookmark = bookmark
			req = &pb.SowAndSubscribeRequest{Query: query, Options: base.Options, SubId: subID}
		}
		s, err := ch.sow.SowAndSubscribe(ctx, req)
		if err != nil {
			return nil, err
		}
		return func() (streamResponse, error) { return s.Recv() }, nil
	}
	resumes := q.TopN == 0 && q.SkipN == 0 && len(q.Grouping) == 0 && o.Conflation == 0
	return c.subscription(ctx, open, resumePlan{query: true, resumable: resumes, subID: o.SubID})
}

// Subscribe subscribes to every later message of a topic (or regex) that matches o.Filter;
// with o.Bookmark, it first replays the journal after it, then sends CompletedEvent (H-4). In a
// cluster it resumes by itself from the last bookmark it delivered (HA-5).
func (c *Client) Subscribe(ctx context.Context, topic string, o SubscribeOptions) iter.Seq2[Event, error] {
	base := &pb.SubscribeRequest{Topic: topic, Filter: o.Filter, Bookmark: o.Bookmark, Options: o.toPb(), SubId: o.SubID}
	open := func(ctx context.Context, ch *channel, bookmark, subID string) (func() (streamResponse, error), error) {
		req := base
		if bookmark != "" {
			req = &pb.SubscribeRequest{Topic: topic, Filter: o.Filter, Bookmark: bookmark, Options: base.Options, SubId: subID}
		}
		s, err := ch.sow.Subscribe(ctx, req)
		if err != nil {
			return nil, err
		}
		return func() (streamResponse, error) { return s.Recv() }, nil
	}
	return c.subscription(ctx, open, resumePlan{resumable: true, bookmark: o.Bookmark, subID: o.SubID})
}

// opener opens a subscription's stream on ch; bookmark set: placed again from there (a resume).
type opener func(ctx context.Context, ch *channel, bookmark, subID string) (func() (streamResponse, error), error)

// resumePlan says how a subscription is resumed.
type resumePlan struct {
	query     bool   // SowAndSubscribe: resumable only once its query is delivered (group_end)
	resumable bool   // false for what cannot be placed again from a bookmark
	bookmark  string // the bookmark the caller asked for (a replay), if any
	subID     string // the caller's subscription id ("": the server's, kept from the first stream)
}

// A subscription that outlives its server (SPEC §13, HA-5): when the node it streams from dies or
// the cluster fails over, it is placed again on a node that has applied the last bookmark it
// delivered, from that bookmark, so that the caller's stream goes on with no gap and no
// duplicate. The new stream is a bookmark subscription (H-4), or for SowAndSubscribe the query as
// of the bookmark with its live changes after it (H-3), whose query frames the caller already
// has: they are not passed on, nor are the new stream's subscribed and a second completed.
// Records at or before the last delivered bookmark are dropped, should a node send one.
//
// The new stream starts one bookmark earlier, and its first record must be the last one
// delivered (same bookmark and timestamp): a primary that died may have sent its subscribers
// entries no replica had, which the new primary replaced with others at the same bookmarks. Such
// a subscription ends with DATA_LOSS (reason SUBSCRIPTION_FORKED) rather than go on from a
// history that is not the cluster's. This is the Node SDK's resume.ts, step for step.
func (c *Client) subscription(ctx context.Context, open opener, plan resumePlan) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cluster := c.nodes.cluster()
		var ch *channel
		if !cluster {
			ch = c.nodes.all()[0]
		} else if c.settings.readFrom == ReadPrimary {
			var err error
			if ch, err = c.nodes.findPrimary(ctx, time.Now().Add(c.settings.failoverTimeout), false); err != nil {
				endedBy(ctx, err, yield)
				return
			}
		} else {
			ch = c.nodes.rotation()[0]
		}
		st := resumeState{plan: plan, subID: plan.subID, from: plan.bookmark, delivered: -1, live: !plan.query}
		defer func() {
			if st.subID != "" {
				c.nodes.ended(st.subID, st.on)
			}
		}()
		var deadline time.Time // of the current resume
		for {
			at := plan.bookmark
			if st.resumed {
				at = st.from
				if st.verify {
					at = uintText(uint64(st.delivered - 1))
				}
			}
			stopped, err := c.stream(ctx, ch, open, at, &st, yield)
			if stopped || err == nil {
				return
			}
			if !st.deliveredSince.IsZero() {
				deadline, st.deliveredSince = time.Time{}, time.Time{}
			}
			e := asError(ctx, err)
			behindHere := st.resumed && (e.Reason == nodeBehind || (e.Code == codes.InvalidArgument && strings.Contains(e.Message, "after the latest")))
			if ctx.Err() != nil {
				endedBy(ctx, e, yield)
				return
			}
			if !cluster || !(isFailover(e) || behindHere) || !plan.resumable || (plan.query && !st.live && st.yielded) {
				yield(nil, e)
				return
			}
			if deadline.IsZero() {
				deadline = time.Now().Add(c.settings.failoverTimeout)
			}
			if behindHere {
				if time.Now().After(deadline) {
					yield(nil, gaveUp(fmt.Sprintf("a subscription (up to bookmark %d)", st.delivered), c.settings.failoverTimeout, e))
					return
				}
				if err := pause(ctx, retryPause); err != nil {
					endedBy(ctx, err, yield)
					return
				}
			}
			held := uint64(max(st.delivered, 0))
			ch = c.nodes.holding(ctx, held, c.settings.readFrom == ReadPrimary, deadline)
			if ctx.Err() != nil {
				endedBy(ctx, e, yield)
				return
			}
			if ch == nil {
				yield(nil, gaveUp(fmt.Sprintf("a subscription (delivered up to bookmark %d)", st.delivered), c.settings.failoverTimeout, e))
				return
			}
			st.resumed = st.yielded && st.from != ""
			st.verify = st.resumed && st.delivered > 0
		}
	}
}

// resumeState is what a subscription has delivered, across its streams.
type resumeState struct {
	plan           resumePlan
	subID          string
	on             *channel
	from           string // where a resume starts
	delivered      int64  // the last record bookmark passed on (-1: none)
	deliveredTS    time.Time
	verify         bool // a resumed stream's first record must be that one again
	live           bool // the query's frames are all delivered
	yielded        bool
	completed      bool
	resumed        bool
	deliveredSince time.Time // set when an event was passed on since the last failure
}

// nodeBehind is the reason of the error that leaves a node found behind the delivered bookmark.
const nodeBehind = "SDK_NODE_BEHIND"

// stream runs one stream of a subscription on ch; stopped: the caller left the loop.
func (c *Client) stream(ctx context.Context, ch *channel, open opener, at string, st *resumeState, yield func(Event, error) bool) (stopped bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recv, err := open(sctx, ch, at, st.subID)
	if err != nil {
		return false, err
	}
	for {
		resp, err := recv()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		ev := eventFromPb(resp)
		if ev == nil {
			continue
		}
		switch e := ev.(type) {
		case *SubscribedEvent:
			if st.resumed && st.delivered >= 0 && int64(e.Bookmark) < st.delivered {
				return false, &Error{Code: codes.Unavailable, Reason: nodeBehind, Metadata: map[string]string{},
					Message: fmt.Sprintf("the node's latest bookmark %d is behind bookmark %d, which this subscription delivered", e.Bookmark, st.delivered)}
			}
			if st.subID == "" {
				st.subID = e.SubID
			}
			st.on = ch
			c.nodes.placed(st.subID, ch)
			if !st.plan.query && st.from == "" {
				st.from = uintText(e.Bookmark)
			}
			if st.resumed {
				continue
			}
		case *GroupBeginEvent:
			if st.resumed {
				continue
			}
			st.from = uintText(e.Bookmark)
		case *SowEvent:
			if st.resumed {
				continue
			}
		case *GroupEndEvent:
			st.live = true
			if st.resumed {
				continue
			}
		case *CompletedEvent:
			if st.completed {
				continue
			}
			st.completed = true
		case *PublishEvent, *DeletedEvent, *OofEvent:
			recs := records(ev)
			if st.verify {
				if len(recs) == 0 || int64(recs[0].Bookmark) != st.delivered || !recs[0].Timestamp.Equal(st.deliveredTS) {
					found := "none"
					if len(recs) > 0 {
						found = fmt.Sprintf("bookmark %d comes first", recs[0].Bookmark)
					}
					return false, &Error{Code: codes.DataLoss, Reason: "SUBSCRIPTION_FORKED", Metadata: map[string]string{}, Message: fmt.Sprintf(
						"this subscription delivered bookmark %d from a node that then failed, and the cluster holds another entry there (%s): "+
							"what it delivered last was never replicated nor acknowledged to its publisher; subscribe again for the cluster's state", st.delivered, found)}
				}
				st.verify = false
			}
			fresh := recs[:0:0]
			for _, r := range recs {
				if int64(r.Bookmark) > st.delivered {
					fresh = append(fresh, r)
				}
			}
			if len(fresh) == 0 {
				continue
			}
			if len(fresh) < len(recs) {
				switch e := ev.(type) {
				case *OofEvent:
					continue
				case *PublishEvent:
					e.Records = fresh
				case *DeletedEvent:
					e.Records = fresh
				}
			}
			last := fresh[len(fresh)-1]
			st.delivered, st.deliveredTS = int64(last.Bookmark), last.Timestamp
			st.from = uintText(last.Bookmark)
		}
		st.yielded = true
		st.deliveredSince = time.Now()
		if !yield(ev, nil) {
			return true, nil
		}
	}
}

// endedBy ends a stream whose context is done, or that failed with err: a cancellation (the
// caller's cancel) ends it without an error, as leaving the loop does; a deadline, or any other
// failure, is the stream's last item.
func endedBy[T any](ctx context.Context, err error, yield func(T, error) bool) {
	var zero T
	if errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	if ctx.Err() != nil {
		err = toError(ctx, err)
	}
	yield(zero, err)
}
