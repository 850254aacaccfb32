package sowdtest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
// test/cluster.ts start one: Debian's etcd on free ports with its data in a temporary directory,
// and sowd nodes through the one launcher (Start), each with its own data directory and port,
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

// Etcd is a running etcd of one member.
type Etcd struct {
	URL string
	cmd *exec.Cmd
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartEtcd starts etcd (/usr/bin/etcd, else etcd on PATH) and waits until it is healthy; the
// test's cleanup stops it.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	bin := "/usr/bin/etcd"
	if _, err := os.Stat(bin); err != nil {
		bin = "etcd"
	}
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	cmd := exec.Command(bin, "--name=t", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+url, "--advertise-client-urls="+url,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=t="+peerURL)
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcd: %v", err)
	}
	e := &Etcd{URL: url, cmd: cmd}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := (&http.Client{Timeout: time.Second}).Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd at %s is not healthy after 30 s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
// follow it), and returns it.
func (c *Cluster) Settled(t testing.TB, names ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
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
