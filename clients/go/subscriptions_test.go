package sowdb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sowdb "github.com/sowdb/sowdb/clients/go"
	"github.com/sowdb/sowdb/clients/go/internal/sowdtest"
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

// Subscribe with a bookmark replays the journal after it, says completed, then goes live; a
// delta publish reaches it as the merged record (D-1), a delete as a DeletedEvent (a
// subscription without oof).
func TestSubscribeReplayCompletedAndDeleted(t *testing.T) {
	c := newClient(t, server(t))
	ctx := timeout(t, 30*time.Second)
	clear(t, c, "markers", "/id > 0")
	ack, err := c.Publish(ctx, "markers", []any{map[string]any{"id": 1, "a": 1, "b": 1}, map[string]any{"id": 2, "a": 2, "b": 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var kinds []string
	mirror := sowdb.NewMirror()
	for ev, err := range c.Subscribe(sctx, "markers", sowdb.SubscribeOptions{Filter: "/id < 100", Bookmark: sowdb.Bookmark(ack.FirstBookmark - 1)}) {
		if err != nil {
			t.Fatalf("%v after %v", err, kinds)
		}
		kinds = append(kinds, ev.Kind())
		mirror.Apply(ev)
		switch ev.(type) {
		case *sowdb.CompletedEvent:
			if mirror.Len() != 2 {
				t.Fatalf("replayed %d records, want 2", mirror.Len())
			}
			if _, err := c.Publish(ctx, "markers", []any{map[string]any{"id": 1, "b": 9}}, &sowdb.PublishOptions{Delta: true}); err != nil {
				t.Fatal(err)
			}
		case *sowdb.PublishEvent:
			if r, _ := mirror.Get("markers", "1"); mirror.Bookmark > ack.LastBookmark {
				if doc, _ := r.Doc(); doc["a"] != 1.0 || doc["b"] != 9.0 {
					t.Fatalf("the mirror holds %s, want the merged a=1 b=9", r.Data)
				}
				if d, err := c.SowDelete(ctx, "markers", sowdb.Delete{SowKeys: []string{"2"}}); err != nil || d.DeletedCount != 1 {
					t.Fatalf("delete of key 2: %+v %v", d, err)
				}
			}
		case *sowdb.DeletedEvent:
			if _, held := mirror.Get("markers", "2"); held || mirror.Len() != 1 {
				t.Fatalf("after the delete the mirror holds %d records", mirror.Len())
			}
			cancel()
		}
	}
	if want := []string{"subscribed", "publish", "completed", "publish", "deleted"}; !slices.Equal(compact(kinds), want) {
		t.Fatalf("events %v, want %v (runs of one kind as one)", kinds, want)
	}
}

// compact drops heartbeats and merges runs of one kind (a replay may come in one batch or two).
func compact(kinds []string) []string {
	var out []string
	for _, k := range kinds {
		if k != "heartbeat" && (len(out) == 0 || out[len(out)-1] != k) {
			out = append(out, k)
		}
	}
	return out
}

// A Mirror with Delta merges a delta subscription's records (key and changed fields, D-2) into
// the record held: named fields overwritten, nested objects merged, arrays replaced (D-1).
func TestMirrorMergesDeltas(t *testing.T) {
	m := sowdb.NewMirror()
	m.Delta = true
	rec := func(b uint64, data string) sowdb.Record {
		return sowdb.Record{Topic: "t", SowKey: "k", Bookmark: b, Data: []byte(data)}
	}
	m.Apply(&sowdb.SowEvent{Records: []sowdb.Record{rec(1, `{"id":1,"a":1,"n":{"x":1,"y":1},"l":[1,2]}`)}})
	m.Apply(&sowdb.PublishEvent{Records: []sowdb.Record{rec(2, `{"id":1,"n":{"y":2},"l":[3]}`)}})
	got, ok := m.Get("t", "k")
	doc, err := got.Doc()
	want := map[string]any{"id": 1.0, "a": 1.0, "n": map[string]any{"x": 1.0, "y": 2.0}, "l": []any{3.0}}
	if !ok || err != nil || !reflect.DeepEqual(doc, want) || m.Bookmark != 2 {
		t.Fatalf("merged %s (bookmark %d), want %v", got.Data, m.Bookmark, want)
	}
	m.Apply(&sowdb.OofEvent{Reason: sowdb.OofDeleted, Record: rec(3, `{}`)})
	if m.Len() != 0 || m.Bookmark != 3 {
		t.Fatalf("after the oof: %d records, bookmark %d", m.Len(), m.Bookmark)
	}
}

// A connection gone silent (a partition: no FIN, no RST; the project's fault proxy in blackhole)
// fails its subscription within the keepalive interval and timeout, instead of never.
func TestKeepalivesFailASubscriptionWhoseServerWentSilent(t *testing.T) {
	proxy := sowdtest.StartProxy(t, server(t))
	c := newClient(t, proxy.Address, sowdb.WithKeepalive(10*time.Second, 2*time.Second))
	ctx := timeout(t, 60*time.Second)
	var silentAt time.Time
	var last error
	for ev, err := range c.Subscribe(ctx, "pulses", sowdb.SubscribeOptions{}) {
		if err != nil {
			last = err
			break
		}
		if _, ok := ev.(*sowdb.SubscribedEvent); ok {
			proxy.GoSilent(t)
			silentAt = time.Now()
		}
	}
	if status.Code(last) != codes.Unavailable {
		t.Fatalf("the silent subscription ended with %v, want UNAVAILABLE", last)
	}
	if took := time.Since(silentAt); took > 20*time.Second {
		t.Fatalf("found dead after %s; the keepalives allow 10 s + 2 s", took)
	}
}
