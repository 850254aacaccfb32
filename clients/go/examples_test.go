package sowdb_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	sowdb "github.com/sowdb/sowdb/clients/go"
	"github.com/sowdb/sowdb/clients/go/internal/sowdtest"
)

// The pages' examples: docs/go.md shows examples/mirror and examples/cluster as they are, and
// clients/go/README.md examples/tour; each runs here against a live sowd (the cluster's in
// cluster_test.go) and prints what the page says it prints.

// buildExample builds examples/NAME into the test's temporary directory.
func buildExample(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", bin, "./examples/"+name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/%s: %v\n%s", name, err, out)
	}
	return bin
}

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

func TestThePagesShowTheExamplesAsTheyAre(t *testing.T) {
	for page, files := range map[string][]string{
		filepath.Join(sowdtest.Repo, "docs", "go.md"): {"examples/mirror/main.go", "examples/cluster/main.go"},
		"README.md": {"examples/tour/main.go"},
	} {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		var shown []string
		for _, m := range goBlock.FindAllStringSubmatch(string(text), -1) {
			shown = append(shown, m[1])
		}
		var want []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, string(b))
		}
		if !slices.Equal(shown, want) {
			t.Errorf("%s: its go blocks are not %v as they are", page, files)
		}
	}
}

func TestTheMirrorExample(t *testing.T) {
	bin := buildExample(t, "mirror")
	address := server(t)
	c := newClient(t, address)
	ctx := timeout(t, 60*time.Second)
	clear(t, c, "orders", "/orderId > 0")
	if _, err := c.Publish(ctx, "orders", []any{
		map[string]any{"orderId": 1, "symbol": "SYM1", "price": 100}, map[string]any{"orderId": 2, "symbol": "SYM1", "price": 110},
		map[string]any{"orderId": 3, "symbol": "SYM1", "price": 120}, map[string]any{"orderId": 4, "symbol": "SYM2", "price": 130},
	}, nil); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "SOWDB_ADDRESS="+address, "SOWDB_SECONDS=") // its default: ends by itself in 10 s
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	want := []string{"3 orders of SYM1", "order 5 at 140", "order 1 left (deleted); 3 now"}
	var lines []string
	sc := bufio.NewScanner(out)
	for len(lines) < len(want) && sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == "3 orders of SYM1" {
			for _, doc := range []any{map[string]any{"orderId": 5, "symbol": "SYM1", "price": 140}, map[string]any{"orderId": 6, "symbol": "SYM2", "price": 150}} {
				if _, err := c.Publish(ctx, "orders", []any{doc}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.SowDelete(ctx, "orders", sowdb.Delete{SowKeys: []string{"1"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(lines, want) {
		t.Fatalf("the example printed %q, want %q\n%s", lines, want, stderr.String())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the example did not end quietly when its time was up: %v\n%s", err, stderr.String())
	}
}

func TestTheTourExample(t *testing.T) {
	bin := buildExample(t, "tour")
	address := server(t)
	c := newClient(t, address)
	clear(t, c, "orders", "/orderId > 0")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "SOWDB_ADDRESS="+address)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	pattern := []string{
		`^stored 2, bookmarks (\d+)\.\.(\d+)$`,
		`^order 1 at 120 \(key 1, bookmark \d+\)$`,
		`^order 2 at 95 \(key 2, bookmark \d+\)$`,
		`^INVALID_ARGUMENT filter 9 expected an operand at column 9 \(end of input\)$`,
	}
	if len(lines) != len(pattern) {
		t.Fatalf("the tour printed:\n%s", out)
	}
	for i, p := range pattern {
		if !regexp.MustCompile(p).MatchString(lines[i]) {
			t.Fatalf("line %d of the tour: %q, want %s", i, lines[i], p)
		}
	}
}

// TestTheBenchmarkProgram runs cmd/sowdb-bench as tools/bench/bench_sdks.py does, on a small
// count: its JSON line, and the records it published are there.
func TestTheBenchmarkProgram(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sowdb-bench")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/sowdb-bench").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	address := server(t)
	clear(t, newClient(t, address), "orders_noindex", "/orderId >= 0")
	for _, mode := range []string{"publish", "sow"} {
		out, err := exec.Command(bin, "--address", address, "--mode", mode, "--count", "1234", "--topic", "orders_noindex").Output()
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		var line struct {
			SDK, Mode string
			Count     int
			Seconds   float64
		}
		if err := json.Unmarshal(out, &line); err != nil || line.SDK != "go" || line.Mode != mode || line.Count != 1234 || line.Seconds <= 0 {
			t.Fatalf("%s printed %s (%v)", mode, out, err)
		}
	}
}
