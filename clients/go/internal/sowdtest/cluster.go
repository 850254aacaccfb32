package sowdtest

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/sowdb/sowdb/clients/go/sowdbpb/sowdb/v1"
)

// A cluster of real processes for the Go tests (SPEC §13), as tests/cluster/ and the Node SDK's
// test/cluster.ts start one: etcd through the project's one etcd launcher (StartEtcd), and sowd
// nodes through the one sowd launcher (Start), each with its own data directory and port,
// advertising the address it bound.

// ClusterTopics is the cluster's topics: one keyed topic with history (a SowAndSubscribe
// resumes as of a bookmark, H-3), and heartbeats every 200 ms.
const ClusterTopics = `
[server]
heartbeat = "200ms"

[[topic]]
name = "orders"
key = ["/orderId"]
history = { window = "1d" }
`

// LeaseTTL is the lease of the tests' clusters: a failover takes this plus a loop or two.
const LeaseTTL = 2 * time.Second

// Etcd is a running etcd of one member, from the project's one etcd launcher.
type Etcd struct {
	URL string
	l   *launched
}

var etcdBanner = regexp.MustCompile(`^etcd listening on (\S+)$`)

// StartEtcd starts etcd through `python -m sowdb.testing.etcd` (Debian's etcd on free ports of
// 127.0.0.1, its data and log in a temporary directory), which prints its URL once etcd is
// healthy; the test's cleanup closes the launcher's standard input, on which it stops etcd.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	l, url := launch(t, "sowdb.testing.etcd", etcdBanner, "--dir", t.TempDir())
	return &Etcd{URL: url, l: l}
}

// Pause stops etcd (SIGSTOP): it answers nothing until Resume.
func (e *Etcd) Pause(t testing.TB) {
	t.Helper()
	e.l.command(t, "pause", "ok")
}

// Resume continues a paused etcd (SIGCONT).
func (e *Etcd) Resume(t testing.TB) {
	t.Helper()
	e.l.command(t, "resume", "ok")
}

// Cluster is etcd and the sowd nodes started on it.
type Cluster struct {
	Etcd  *Etcd
	mu    sync.Mutex
	Nodes map[string]*Sowd
}

// StartCluster starts etcd, then the named nodes at once (each waits for its banner).
func StartCluster(t testing.TB, names ...string) *Cluster {
	t.Helper()
	c := &Cluster{Etcd: StartEtcd(t), Nodes: map[string]*Sowd{}}
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := Start(t, Options{Config: c.Config(), Args: []string{"--node", n, "--advertise", "127.0.0.1:0"}})
			c.mu.Lock()
			c.Nodes[n] = s
			c.mu.Unlock()
		}()
	}
	wg.Wait()
	if len(c.Nodes) != len(names) {
		t.FailNow() // Start reported why
	}
	return c
}

// Config is the nodes' configuration: ClusterTopics and the cluster on this etcd, ack "sync".
func (c *Cluster) Config() string {
	return ClusterTopics + fmt.Sprintf(`
[cluster]
name = "t"
etcd = [%q]
ack = "sync"
sync_replicas = 1
lease_ttl = "%ds"
`, c.Etcd.URL, int(LeaseTTL/time.Second))
}

// Addresses is every node's address, in name order.
func (c *Cluster) Addresses() []string {
	names := make([]string, 0, len(c.Nodes))
	for n := range c.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = c.Nodes[n].Address
	}
	return out
}

// Own is a node's own row of ClusterStatus (nil: it does not answer), asked with the generated
// stub directly, so that the check does not depend on the client under test.
func (c *Cluster) Own(name string) *pb.ClusterNode {
	conn, err := grpc.NewClient(c.Nodes[name].Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := pb.NewAdminServiceClient(conn).ClusterStatus(ctx, &pb.ClusterStatusRequest{})
	if err != nil || len(resp.GetNodes()) == 0 {
		return nil
	}
	return resp.GetNodes()[0]
}

// Settled waits for a primary among names whose ClusterStatus lists them all (its replicas
// follow it), and returns it. A node that stopped to cut its forked journal, or to install a
// copied checkpoint, "at its next start" (with sync_replicas = 1 the replica outside the sync set
// may hold entries the promoted member never got) is started again on its address and data, as
// a supervisor would: the Python and Node harnesses do the same.
func (c *Cluster) Settled(t testing.TB, names ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range names {
			c.restartIfStopped(t, n)
		}
		for _, n := range names {
			if own := c.Own(n); own != nil && own.GetRole() == "primary" && c.lists(n) == len(names) {
				return n
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var seen []string
	for _, n := range names {
		if own := c.Own(n); own != nil {
			seen = append(seen, fmt.Sprintf("%s %s at %d", n, own.GetRole(), own.GetAppliedBookmark()))
		} else {
			seen = append(seen, n+" down")
		}
	}
	t.Fatalf("no settled primary among %v in 30 s: %s", names, strings.Join(seen, ", "))
	return ""
}

// restartIfStopped starts node name again when it exited saying it does so at its next start.
func (c *Cluster) restartIfStopped(t testing.TB, name string) {
	c.mu.Lock()
	old := c.Nodes[name]
	c.mu.Unlock()
	if old == nil {
		return
	}
	select {
	case <-old.Exited():
	default:
		return
	}
	out := old.Output()
	if !strings.Contains(out, "forked after bookmark") && !strings.Contains(out, "at its next start") {
		return
	}
	again := Start(t, Options{
		Config:  c.Config(),
		DataDir: old.DataDir,
		Args:    []string{"--node", name, "--listen", old.Address, "--advertise", "127.0.0.1:0"},
	})
	c.mu.Lock()
	c.Nodes[name] = again
	c.mu.Unlock()
}

func (c *Cluster) lists(name string) int {
	conn, err := grpc.NewClient(c.Nodes[name].Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := pb.NewAdminServiceClient(conn).ClusterStatus(ctx, &pb.ClusterStatusRequest{})
	if err != nil {
		return 0
	}
	return len(resp.GetNodes())
}
