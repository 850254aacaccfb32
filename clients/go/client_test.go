package sowdb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sowdb "github.com/sowdb/sowdb/clients/go"
	"github.com/sowdb/sowdb/clients/go/internal/sowdtest"
)

// The client's calls against one live sowd (tests/topics.toml), each test on its own topic or
// after clearing it, so that they share the server.

var (
	sharedOnce sync.Once
	shared     *sowdtest.Sowd
)

// server is one sowd for the tests of this file, started by the first that needs it and stopped
// by TestMain.
func server(t *testing.T) string {
	sharedOnce.Do(func() { shared = sowdtest.StartShared(t, sowdtest.Options{}) })
	if shared == nil {
		t.Fatal("the shared sowd did not start")
	}
	return shared.Address
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	sowdtest.Exit(code)
}

func newClient(t *testing.T, address string, opts ...sowdb.Option) *sowdb.Client {
	t.Helper()
	c, err := sowdb.NewClient(address, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

type order struct {
	OrderID int     `json:"orderId"`
	Symbol  string  `json:"symbol"`
	Price   float64 `json:"price"`
	Qty     int     `json:"qty"`
}

func clear(t *testing.T, c *sowdb.Client, topic, filter string) {
	t.Helper()
	if _, err := c.SowDelete(timeout(t, 10*time.Second), topic, sowdb.Delete{Filter: filter}); err != nil {
		t.Fatal(err)
	}
}

func TestPublishInBatchesThenSow(t *testing.T) {
	c := newClient(t, server(t))
	ctx := timeout(t, 30*time.Second)
	clear(t, c, "orders_noindex", "/orderId > 0")
	docs := make([]any, 250)
	for i := range docs {
		docs[i] = order{OrderID: i + 1, Symbol: fmt.Sprintf("SYM%d", i%3), Price: float64(i), Qty: i % 7}
	}
	ack, err := c.Publish(ctx, "orders_noindex", docs, &sowdb.PublishOptions{BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if ack.Count != 250 || ack.LastBookmark-ack.FirstBookmark != 249 {
		t.Fatalf("ack %+v: want 250 messages at consecutive bookmarks", ack)
	}
	var got []order
	for r, err := range c.Sow(ctx, "orders_noindex", sowdb.Query{Filter: "/symbol = 'SYM1'", OrderBy: "/price DESC", TopN: 5, BatchSize: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Topic != "orders_noindex" || r.SowKey == "" || r.Bookmark < ack.FirstBookmark || r.Timestamp.IsZero() {
			t.Fatalf("record %+v", r)
		}
		var o order
		if err := r.Decode(&o); err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	ids := []int{}
	for _, o := range got {
		ids = append(ids, o.OrderID)
	}
	if !slices.Equal(ids, []int{248, 245, 242, 239, 236}) {
		t.Fatalf("top 5 of SYM1 by price: %v", ids)
	}
	// a historical query (H-2) as of the first batch's last bookmark sees that batch only
	old, err := c.SowAll(ctx, "orders_noindex", sowdb.Query{Bookmark: sowdb.Bookmark(ack.FirstBookmark + 99)})
	if err != nil {
		var e *sowdb.Error
		if !errors.As(err, &e) || e.Code != codes.FailedPrecondition {
			t.Fatal(err)
		}
		// orders_noindex has no history: refused as such, which is the rule too
	} else if len(old) != 100 {
		t.Fatalf("as of the first batch: %d records", len(old))
	}
}

func TestErrorsCarryTheStatusDetails(t *testing.T) {
	c := newClient(t, server(t))
	ctx := timeout(t, 30*time.Second)
	_, err := c.SowAll(ctx, "orders", sowdb.Query{Filter: "/price >"})
	var e *sowdb.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a *sowdb.Error, got %T %v", err, err)
	}
	if status.Code(err) != codes.InvalidArgument || e.Field() != "filter" || e.Reason != "EXPRESSION_ERROR" || e.Column() != 9 {
		t.Fatalf("%v: field %q reason %q column %d", e, e.Field(), e.Reason, e.Column())
	}
	// a refused publish request: the offending message's index in the whole call, what was stored
	clear(t, c, "items", "/id > 0")
	docs := []any{map[string]any{"id": 1}, map[string]any{"id": 2}, map[string]any{"id": 3}, map[string]any{"name": "no id"}, map[string]any{"id": 5}}
	_, err = c.Publish(ctx, "items", docs, &sowdb.PublishOptions{BatchSize: 2})
	var pe *sowdb.PublishError
	if !errors.As(err, &pe) || !errors.As(err, &e) {
		t.Fatalf("want a *sowdb.PublishError, got %T %v", err, err)
	}
	if pe.Err.Code != codes.InvalidArgument || pe.BatchIndex != 1 || pe.MessageIndex != 3 || pe.Stored != 2 {
		t.Fatalf("%v: batch %d message %d stored %d", pe, pe.BatchIndex, pe.MessageIndex, pe.Stored)
	}
	left, err := c.SowAll(ctx, "items", sowdb.Query{OrderBy: "/id"})
	if err != nil || len(left) != 2 {
		t.Fatalf("after the refusal: %d records (%v); want the first request's 2", len(left), err)
	}
}

func TestDeadlineAndCancellation(t *testing.T) {
	c := newClient(t, server(t))
	// a deadline bounds a whole subscription: past it, DEADLINE_EXCEEDED
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var last error
	for _, err := range c.Subscribe(ctx, "pulses", sowdb.SubscribeOptions{}) {
		last = err
	}
	if status.Code(last) != codes.DeadlineExceeded {
		t.Fatalf("a subscription past its deadline ended with %v", last)
	}
	// cancelling ends the stream without an error, and the server drops the subscription
	live, stop := context.WithCancel(context.Background())
	defer stop()
	var subID string
	for ev, err := range c.Subscribe(live, "pulses", sowdb.SubscribeOptions{}) {
		if err != nil {
			t.Fatalf("a cancelled subscription ended with %v", err)
		}
		if s, ok := ev.(*sowdb.SubscribedEvent); ok {
			subID = s.SubID
			if _, err := c.ReplaceSubscription(timeout(t, 5*time.Second), subID, sowdb.Replace{Filter: "/id > 1"}); err != nil {
				t.Fatalf("replace on a live subscription: %v", err)
			}
			stop()
		}
	}
	_, err := c.ReplaceSubscription(timeout(t, 5*time.Second), subID, sowdb.Replace{Filter: "/id > 2"})
	for i := 0; status.Code(err) != codes.NotFound && i < 50; i++ { // the server drops it as the cancel arrives
		time.Sleep(100 * time.Millisecond)
		_, err = c.ReplaceSubscription(timeout(t, 5*time.Second), subID, sowdb.Replace{Filter: "/id > 2"})
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("replace after cancel: %v, want NOT_FOUND", err)
	}
}

func TestPingListTopicsAndStats(t *testing.T) {
	c := newClient(t, server(t))
	ctx := timeout(t, 10*time.Second)
	if rtt, err := c.Ping(ctx); err != nil || rtt <= 0 {
		t.Fatalf("ping: %v %v", rtt, err)
	}
	topics, err := c.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, ti := range topics {
		names = append(names, ti.GetName())
	}
	if !slices.Contains(names, "orders") || !slices.Contains(names, "items") {
		t.Fatalf("topics %v", names)
	}
	stats, err := c.Stats(ctx, "orders", true)
	if err != nil || len(stats.GetTopics()) != 1 {
		t.Fatalf("stats of orders: %v %v", stats, err)
	}
	// a server that does not answer: UNAVAILABLE, within the call's deadline
	down := newClient(t, "127.0.0.1:1")
	if _, err := down.Ping(timeout(t, 5*time.Second)); status.Code(err) != codes.Unavailable {
		t.Fatalf("ping of nothing: %v", err)
	}
}

func TestSowEventsGiveThePointAndTheCounts(t *testing.T) {
	c := newClient(t, server(t))
	ctx := timeout(t, 30*time.Second)
	clear(t, c, "items", "/id > 0")
	ack, err := c.Publish(ctx, "items", []any{map[string]any{"id": 1, "q": 1}, map[string]any{"id": 2, "q": 5}, map[string]any{"id": 3, "q": 9}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var begin *sowdb.GroupBeginEvent
	var end *sowdb.GroupEndEvent
	for ev, err := range c.SowEvents(ctx, "items", sowdb.Query{Filter: "/q > 2", TopN: 1, BatchSize: 1, QueryID: "q7"}) {
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, ev.Kind())
		switch e := ev.(type) {
		case *sowdb.GroupBeginEvent:
			begin = e
		case *sowdb.GroupEndEvent:
			end = e
		}
	}
	if !slices.Equal(kinds, []string{"group_begin", "sow", "group_end"}) || begin.QueryID != "q7" || begin.Bookmark < ack.LastBookmark {
		t.Fatalf("events %v, group_begin %+v", kinds, begin)
	}
	if end.RecordsReturned != 1 || end.RecordsMatched != 2 || end.RecordsScanned < 2 {
		t.Fatalf("group_end %+v: want 1 returned of 2 matched", end)
	}
}
