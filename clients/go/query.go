package sowdb

import (
	"context"
	"errors"
	"io"
	"iter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/sowdb/sowdb/clients/go/sowdbpb/sowdb/v1"
)

// Query is what Sow and SowAndSubscribe ask: the protocol's SowRequest by Go names. The zero
// value is every record of the topic; a zero count (TopN, SkipN, BatchSize) is "not given".
type Query struct {
	// Filter is a filter expression ("/symbol = 'SYM1' AND /qty > 10"); "" matches every record.
	Filter string
	// OrderBy is "/field [ASC|DESC], ...".
	OrderBy string
	// TopN returns at most this many records; SkipN skips this many first (requires TopN).
	TopN, SkipN int
	// BatchSize is the records per response, 1..10000 (default DefaultBatchSize, Q-6).
	BatchSize int
	// SowKeys restricts the query to these records; an empty non-nil slice is refused.
	SowKeys []string
	// QueryID is echoed in group_begin and group_end.
	QueryID string
	// Bookmark queries the state as of this point (H-2): a sequence number ("10001"), "0",
	// "now", a UTC time "20260102T150405Z" or any ISO-8601 time; see Bookmark and BookmarkAt.
	Bookmark string
	// Grouping and Projection make an aggregated query.
	Grouping, Projection []string
	// Select is the fields to return, "[-/,+/a,+/b/c]".
	Select string
}

func (q Query) toPb(topic string) *pb.SowRequest {
	batch := q.BatchSize
	if batch == 0 {
		batch = DefaultBatchSize
	}
	return &pb.SowRequest{
		Topic: topic, Filter: q.Filter, SowKeys: q.SowKeys, QueryId: q.QueryID, OrderBy: q.OrderBy,
		TopN: optional(q.TopN), SkipN: optional(q.SkipN), BatchSize: optional(batch),
		Bookmark: q.Bookmark, Grouping: q.Grouping, Projection: q.Projection, Select: q.Select,
	}
}

// SubscribeOptions are the options of a subscription (Subscribe, SowAndSubscribe and Replace).
// The zero value is a plain subscription: full records, no oof.
type SubscribeOptions struct {
	// Filter and Bookmark are Subscribe's (SowAndSubscribe takes them in its Query): a filter
	// expression, and a point to replay the journal after first (H-4), then CompletedEvent.
	Filter, Bookmark string
	// Oof sends an OofEvent when a received record leaves the result set (O-1).
	Oof bool
	// Delta sends the key fields and changed fields only (D-2); NoEmpties then suppresses
	// deliveries in which no data field changed, and OmitKeys leaves the key fields out.
	Delta, NoEmpties, OmitKeys bool
	// Conflation delivers at most one change per key per interval, the latest (C-1), keyed by
	// ConflationKey paths (the SowKey when empty). SowAndSubscribe only.
	Conflation    time.Duration
	ConflationKey []string
	// SubID is a subscription id of the caller's choice; the server chooses one when "".
	SubID string
}

func (o SubscribeOptions) toPb() *pb.SubscriptionOptions {
	out := &pb.SubscriptionOptions{Oof: o.Oof, Delta: o.Delta, NoEmpties: o.NoEmpties, SendKeys: !o.OmitKeys, ConflationKey: o.ConflationKey}
	if o.Conflation > 0 {
		out.Conflation = durationpb.New(o.Conflation)
	}
	return out
}

// Bookmark is the text of a sequence number, for Query.Bookmark and Subscribe's bookmark.
func Bookmark(seq uint64) string { return uintText(seq) }

// BookmarkAt is the text of a point in time, for Query.Bookmark and Subscribe's bookmark.
func BookmarkAt(t time.Time) string { return t.UTC().Format("20060102T150405.000000Z") }

// Sow queries the current state of one or more SOW topics (a regex topic queries every topic it
// matches) and yields each record in order; the loop ends at the last one, or with one error:
//
//	for rec, err := range client.Sow(ctx, "orders", sowdb.Query{Filter: "/qty > 10"}) {
//		if err != nil { return err }
//		...
//	}
//
// Leaving the loop early, or cancelling ctx, ends the query quietly; a deadline is an error. In a
// cluster the query goes where ReadFrom says, on another node when its node fails before it sent
// a record. SowEvents gives the query's frames too (the point it sees, the counts).
func (c *Client) Sow(ctx context.Context, topic string, q Query) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		c.sow(ctx, topic, q, func(resp *pb.SowResponse) bool {
			for _, r := range resp.GetRecords().GetRecords() {
				if !yield(recordFromPb(r), nil) {
					return false
				}
			}
			return true
		}, func(err error) { yield(Record{}, err) })
	}
}

// SowEvents is Sow as the events of the query: a GroupBeginEvent (the bookmark the query sees),
// SowEvent batches of at most Query.BatchSize records, and a GroupEndEvent with the counts of
// records returned, matched and scanned.
func (c *Client) SowEvents(ctx context.Context, topic string, q Query) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		c.sow(ctx, topic, q, func(resp *pb.SowResponse) bool {
			var ev Event
			switch e := resp.GetEvent().(type) {
			case *pb.SowResponse_GroupBegin:
				ev = &GroupBeginEvent{QueryID: e.GroupBegin.GetQueryId(), Bookmark: e.GroupBegin.GetBookmark()}
			case *pb.SowResponse_Records:
				ev = &SowEvent{Records: recordsFromPb(e.Records.GetRecords())}
			case *pb.SowResponse_GroupEnd:
				g := e.GroupEnd
				ev = &GroupEndEvent{QueryID: g.GetQueryId(), RecordsReturned: g.GetRecordsReturned(), RecordsMatched: g.GetRecordsMatched(), RecordsScanned: g.GetRecordsScanned()}
			default:
				return true
			}
			return yield(ev, nil)
		}, func(err error) { yield(nil, err) })
	}
}

// sow runs a query, passing each response to take (false: the caller stopped) and its failure,
// if any, to fail (a cancellation is none: see endedBy).
func (c *Client) sow(ctx context.Context, topic string, q Query, take func(*pb.SowResponse) bool, fail func(error)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req := q.toPb(topic)
	sent := false
	_, err := onReader(ctx, c, "sow on "+topic, func(ch *channel) (struct{}, error) {
		stream, err := ch.sow.Sow(ctx, req)
		if err != nil {
			return struct{}{}, err
		}
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return struct{}{}, nil
			}
			if err != nil {
				if sent { // part of the result delivered: not retried elsewhere
					return struct{}{}, &stopRetry{toError(ctx, err)}
				}
				return struct{}{}, err
			}
			sent = true
			if !take(resp) {
				return struct{}{}, errStopped
			}
		}
	})
	var stop *stopRetry
	switch {
	case err == nil, errors.Is(err, errStopped):
	case errors.As(err, &stop):
		endedBy(ctx, stop.err, func(_ struct{}, err error) bool { fail(err); return false })
	default:
		endedBy(ctx, err, func(_ struct{}, err error) bool { fail(err); return false })
	}
}

// SowAll runs Sow and collects the records, with the query's closing counts.
func (c *Client) SowAll(ctx context.Context, topic string, q Query) ([]Record, error) {
	var out []Record
	for r, err := range c.Sow(ctx, topic, q) {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// errStopped ends a call whose caller left the loop: not an error to report.
var errStopped = &Error{Code: codes.Canceled, Message: "the caller stopped reading", Metadata: map[string]string{}}

// stopRetry carries an error that must not be retried on another node.
type stopRetry struct{ err error }

func (s *stopRetry) Error() string { return s.err.Error() }
func (s *stopRetry) Unwrap() error { return s.err }

func uintText(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
