package sowdb_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sowdb "github.com/sowdb/sowdb/clients/go"
	"github.com/sowdb/sowdb/clients/go/internal/sowdtest"
)

// The Go SDK against a cluster of real processes (SPEC §13, HA-5): etcd and three sowd with
// ack = "sync", and a kill -9 of the primary under load. Writes find the new primary and go on,
// each applied once (J-4 producer ids); a subscription resumes from the last bookmark it
// delivered with no gap and no duplicate; a mirror (SowAndSubscribe) resumes as of its bookmark
// and ends equal to the new primary's state. The Node SDK's cluster.test.ts is the same story.

type delivery struct {
	bookmark uint64
	id       int
}

func TestKill9OfThePrimaryUnderLoad(t *testing.T) {
	cluster := sowdtest.StartCluster(t, "n1", "n2", "n3")
	old := cluster.Settled(t, "n1", "n2", "n3")
	list := cluster.Addresses()
	servers := fmt.Sprintf("%s,%s,%s", list[0], list[1], list[2])
	writer := newClient(t, servers)
	runClusterExample(t, servers)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	sctx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()

	// a subscriber on the primary, and a mirror on any node
	var mu sync.Mutex
	var delivered []delivery
	from := int64(-1)
	subErr := make(chan error, 1)
	go func() {
		for ev, err := range newClient(t, servers).Subscribe(sctx, "orders", sowdb.SubscribeOptions{}) {
			if err != nil {
				subErr <- err
				return
			}
			mu.Lock()
			switch e := ev.(type) {
			case *sowdb.SubscribedEvent:
				if from < 0 {
					from = int64(e.Bookmark)
				}
			case *sowdb.PublishEvent:
				for _, r := range e.Records {
					var o order
					_ = r.Decode(&o)
					delivered = append(delivered, delivery{r.Bookmark, o.OrderID})
				}
			}
			mu.Unlock()
		}
		subErr <- nil
	}()
	mirror := sowdb.NewMirror()
	var mirrored []uint64
	var mirrorSize, mirrorReady atomic.Int64
	mirrorErr := make(chan error, 1)
	go func() {
		reader := newClient(t, servers, sowdb.WithReadFrom(sowdb.ReadAny))
		for ev, err := range reader.SowAndSubscribe(sctx, "orders", sowdb.Query{}, sowdb.SubscribeOptions{}) {
			if err != nil {
				mirrorErr <- err
				return
			}
			mirror.Apply(ev)
			if p, ok := ev.(*sowdb.PublishEvent); ok {
				for _, r := range p.Records {
					mirrored = append(mirrored, r.Bookmark)
				}
			}
			if mirror.Ready {
				mirrorReady.Store(1)
			}
			mirrorSize.Store(int64(mirror.Len()))
		}
		mirrorErr <- nil
	}()
	waitFor(t, 15*time.Second, "subscribed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return from >= 0 && mirrorReady.Load() == 1
	})

	// two writers of 20 orders per publish, until told to stop
	var ackMu sync.Mutex
	var acknowledged []int
	var stop atomic.Bool
	loadErr := make(chan error, 2)
	for w := 1; w <= 2; w++ {
		go func() {
			for i := w * 1_000_000; !stop.Load(); i += 20 {
				docs, ids := make([]any, 20), make([]int, 20)
				for k := range docs {
					ids[k] = i + k
					docs[k] = order{OrderID: i + k, Symbol: "W", Qty: w}
				}
				ack, err := writer.Publish(ctx, "orders", docs, nil)
				if err != nil || ack.Count != 20 {
					loadErr <- fmt.Errorf("writer %d: %v (ack %+v)", w, err, ack)
					return
				}
				ackMu.Lock()
				acknowledged = append(acknowledged, ids...)
				ackMu.Unlock()
			}
			loadErr <- nil
		}()
	}
	acks := func() int { ackMu.Lock(); defer ackMu.Unlock(); return len(acknowledged) }
	waitFor(t, 30*time.Second, "load before the kill", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acks() >= 400 && len(delivered) >= 400
	})
	cluster.Nodes[old].Kill9(t)
	killed := time.Now()
	before := acks()
	waitFor(t, 40*time.Second, "acknowledgements by the new primary", func() bool { return acks() >= before+400 })
	failover := time.Since(killed)
	stop.Store(true)
	for range 2 {
		if err := <-loadErr; err != nil {
			t.Fatal(err) // no publish failed: each was retried on the new primary
		}
	}
	var replicas []string
	for n := range cluster.Nodes {
		if n != old {
			replicas = append(replicas, n)
		}
	}
	primary := cluster.Settled(t, replicas...)
	last := acks()
	waitFor(t, 30*time.Second, "every write delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		ids := map[int]bool{}
		for _, d := range delivered {
			ids[d.id] = true
		}
		return len(ids) >= last || len(subErr) > 0
	})
	check := newClient(t, cluster.Nodes[primary].Address)
	state, err := check.SowAll(ctx, "orders", sowdb.Query{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the mirror holds every write", func() bool {
		return mirrorSize.Load() >= int64(len(state)) || len(mirrorErr) > 0
	})
	stopSubs()
	if err := <-subErr; err != nil {
		t.Fatalf("the subscriber failed: %v", err)
	}
	if err := <-mirrorErr; err != nil {
		t.Fatalf("the mirror failed: %v", err)
	}

	// the journal of orders on the new primary: what was delivered and applied
	var journal []delivery
	jctx, jcancel := context.WithTimeout(ctx, 30*time.Second)
	defer jcancel()
	for ev, err := range check.Subscribe(jctx, "orders", sowdb.SubscribeOptions{Bookmark: "0"}) {
		if err != nil {
			t.Fatalf("the journal's replay: %v", err)
		}
		if p, ok := ev.(*sowdb.PublishEvent); ok {
			for _, r := range p.Records {
				var o order
				_ = r.Decode(&o)
				journal = append(journal, delivery{r.Bookmark, o.OrderID})
			}
		}
		if _, ok := ev.(*sowdb.CompletedEvent); ok {
			break
		}
	}
	// no gap, no duplicate: what the subscriber got is the journal after its point, entry for entry
	upTo := delivered[len(delivered)-1].bookmark
	var expected []delivery
	for _, j := range journal {
		if int64(j.bookmark) > from && j.bookmark <= upTo {
			expected = append(expected, j)
		}
	}
	if !slices.Equal(delivered, expected) {
		at := 0
		for at < min(len(delivered), len(expected)) && delivered[at] == expected[at] {
			at++
		}
		t.Fatalf("the subscriber's records are not the journal's from #%d of %d (journal %d): delivered %v, journal %v",
			at, len(delivered), len(expected), delivered[max(0, at-2):min(len(delivered), at+3)], expected[max(0, at-2):min(len(expected), at+3)])
	}
	// the mirror: every live record once, in order, and the state of the new primary
	if !slices.IsSorted(mirrored) || len(slices.Compact(slices.Clone(mirrored))) != len(mirrored) {
		t.Fatal("the mirror's bookmarks do not rise")
	}
	got, want := []uint64{}, []uint64{}
	for _, r := range mirror.Records() {
		got = append(got, r.Bookmark)
	}
	for _, r := range state {
		want = append(want, r.Bookmark)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the mirror holds %d records, the new primary %d", len(got), len(want))
	}
	// every acknowledged write is there (sync: nothing lost), and once (J-4)
	times := map[int]int{}
	for _, j := range journal {
		times[j.id]++
	}
	for _, id := range acknowledged {
		if times[id] != 1 {
			t.Fatalf("order %d acknowledged, in the journal %d times", id, times[id])
		}
	}
	if failover > sowdtest.LeaseTTL+15*time.Second {
		t.Fatalf("the first acknowledgement came %s after the kill", failover)
	}
	t.Logf("kill -9 of %s: writes acknowledged again after %s; %d writes, %d delivered", old, failover.Round(time.Millisecond), len(acknowledged), len(delivered))
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runClusterExample runs examples/cluster (docs/go.md's) against the cluster: a publish on the
// primary, then every node's row.
func runClusterExample(t *testing.T, servers string) {
	t.Helper()
	cmd := exec.Command(buildExample(t, "cluster"))
	cmd.Env = append(os.Environ(), "SOWDB_SERVERS="+servers)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/cluster: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	row := regexp.MustCompile(`^n[123] is (primary|replica), applied \d+$`)
	primaries := 0
	for _, l := range lines[1:] {
		if !row.MatchString(l) {
			t.Fatalf("examples/cluster printed %q:\n%s", l, out)
		}
		if strings.Contains(l, "is primary") {
			primaries++
		}
	}
	if len(lines) != 4 || !regexp.MustCompile(`^stored at bookmark \d+$`).MatchString(lines[0]) || primaries != 1 {
		t.Fatalf("examples/cluster printed:\n%s", out)
	}
}
