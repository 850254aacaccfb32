package sowdb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sowdb "github.com/sowdb/sowdb/clients/go"
)

// SowAndSubscribe under a concurrent publisher (S-1): mirrors started at random moments while
// orders move in and out of the filter end equal to a query of the final state, every event after
// the query's point, bookmarks rising (no duplicate), nothing missed (no gap).

func TestSowAndSubscribeWithOofUnderAConcurrentPublisher(t *testing.T) {
	c := newClient(t, server(t))
	ctx := timeout(t, 90*time.Second)
	const topic, filter = "orders", "/symbol = 'HOT' AND /qty < 50"
	clear(t, c, topic, "/orderId > 0")

	// the publisher: 60 orders updated over and over, moving in and out of the filter
	var published sync.WaitGroup
	published.Add(1)
	go func() {
		defer published.Done()
		rng := rand.New(rand.NewPCG(1, 2))
		for round := range 40 {
			docs := make([]any, 0, 30)
			for range 30 {
				sym := []string{"HOT", "COLD"}[rng.IntN(2)]
				docs = append(docs, order{OrderID: 1 + rng.IntN(60), Symbol: sym, Price: float64(round), Qty: rng.IntN(100)})
			}
			if _, err := c.Publish(ctx, topic, docs, &sowdb.PublishOptions{BatchSize: 7}); err != nil {
				t.Errorf("publisher: %v", err)
				return
			}
			if round%5 == 0 {
				if _, err := c.SowDelete(ctx, topic, sowdb.Delete{Filter: fmt.Sprintf("/orderId = %d", 1+rng.IntN(60))}); err != nil {
					t.Errorf("publisher: %v", err)
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	type watcher struct {
		mirror *sowdb.Mirror
		done   chan error
		oofs   int
		seen   atomic.Uint64 // the last bookmark applied, read for progress while it runs
	}
	var watchers []*watcher
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range 4 {
		time.Sleep(time.Duration(i*70) * time.Millisecond)
		w := &watcher{mirror: sowdb.NewMirror(), done: make(chan error, 1)}
		watchers = append(watchers, w)
		go func() {
			var point, last uint64
			for ev, err := range c.SowAndSubscribe(sctx, topic, sowdb.Query{Filter: filter, BatchSize: 5}, sowdb.SubscribeOptions{Oof: true}) {
				if err != nil {
					w.done <- err
					return
				}
				switch e := ev.(type) {
				case *sowdb.GroupBeginEvent:
					point, last = e.Bookmark, e.Bookmark
				case *sowdb.PublishEvent, *sowdb.OofEvent:
					for _, r := range eventRecords(ev) {
						if r.Bookmark <= last || r.Bookmark <= point {
							w.done <- fmt.Errorf("%s at bookmark %d after %d (query point %d): a duplicate", ev.Kind(), r.Bookmark, last, point)
							return
						}
						last = r.Bookmark
					}
					if o, ok := ev.(*sowdb.OofEvent); ok {
						w.oofs++
						if o.Reason != sowdb.OofMatch && o.Reason != sowdb.OofDeleted {
							w.done <- fmt.Errorf("oof reason %q", o.Reason)
							return
						}
					}
				}
				w.mirror.Apply(ev)
				w.seen.Store(w.mirror.Bookmark)
			}
			w.done <- nil
		}()
	}
	published.Wait()
	// a marker that matches: once every mirror has it, each has seen every earlier change
	ack, err := c.Publish(ctx, topic, []any{order{OrderID: 1000, Symbol: "HOT", Qty: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, w := range watchers {
		for w.seen.Load() < ack.LastBookmark && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	cancel()
	want := map[string]string{}
	recs, err := c.SowAll(ctx, topic, sowdb.Query{Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		want[r.SowKey] = string(r.Data)
	}
	oofs := 0
	for i, w := range watchers {
		if err := <-w.done; err != nil {
			t.Fatalf("mirror %d: %v", i, err)
		}
		got := map[string]string{}
		for _, r := range w.mirror.Records() {
			got[r.SowKey] = string(r.Data)
		}
		if !w.mirror.Ready || !reflect.DeepEqual(got, want) {
			t.Fatalf("mirror %d (ready %v) holds %d records, the state %d:\n%v\n%v", i, w.mirror.Ready, len(got), len(want), got, want)
		}
		oofs += w.oofs
	}
	if oofs == 0 {
		t.Fatal("no oof was delivered: the publisher never moved a record out of the filter?")
	}
}

func eventRecords(ev sowdb.Event) []sowdb.Record {
	switch e := ev.(type) {
	case *sowdb.PublishEvent:
		return e.Records
	case *sowdb.OofEvent:
		return []sowdb.Record{e.Record}
	case *sowdb.DeletedEvent:
		return e.Records
	case *sowdb.SowEvent:
		return e.Records
	}
	return nil
}
