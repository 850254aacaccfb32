// Package sowdtest starts a real sowd for the Go SDK's tests through the one launcher of the
// Python tests, the benchmarks and the Node tests, `python -m sowdb.testing`: port 0, a temporary
// data directory, a test config (tests/topics.toml unless told). The launcher prints sowd's
// output, the `listening on` banner included, and stops sowd on SIGTERM or when its standard
// input closes, so that a test binary that dies leaves no server behind. etcd and the TCP fault
// proxy come the same way, from the project's one launcher of each (`python -m
// sowdb.testing.etcd`, `python -m sowdb.testing.faultproxy`; cluster.go, proxy.go).
//
// The Python interpreter is $SOWDB_PYTHON, else the repository's .venv/bin/python.
package sowdtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Repo is the repository's root (three levels above this file's folder).
var Repo = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", "..", ".."))
}()

// TestConfig is the tests' topics: the one file every SDK's tests read.
func TestConfig(t testing.TB) string {
	b, err := os.ReadFile(filepath.Join(Repo, "tests", "topics.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Python is the interpreter that runs the launcher.
func Python() string {
	if p := os.Getenv("SOWDB_PYTHON"); p != "" {
		return p
	}
	return filepath.Join(Repo, ".venv", "bin", "python")
}

// pythonModule is `python -m module args...` in the repository's root, with this checkout's
// server and Python SDK first on the path (a venv shared between checkouts may point elsewhere).
func pythonModule(module string, args ...string) *exec.Cmd {
	cmd := exec.Command(Python(), append([]string{"-m", module}, args...)...)
	cmd.Dir = Repo
	pythonPath := filepath.Join(Repo, "server") + string(os.PathListSeparator) + filepath.Join(Repo, "clients", "python")
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONPATH="+pythonPath)
	return cmd
}

// Sowd is one running server.
type Sowd struct {
	// Address is "127.0.0.1:PORT".
	Address string
	DataDir string
	cmd     *exec.Cmd
	stdin   interface{ Close() error }
	mu      sync.Mutex
	out     strings.Builder
	exited  chan struct{}
}

// Output is everything the server printed so far.
func (s *Sowd) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

var banner = regexp.MustCompile(`listening on (\S+)`)

// Options of Start.
type Options struct {
	// Config is the TOML text (TestConfig by default).
	Config string
	// Args are more sowd flags.
	Args []string
	// Env is more environment.
	Env []string
	// DataDir is an earlier server's, to start it again (default: a new temporary one).
	DataDir string
	// Until is the line to wait for instead of the banner, its first group the address.
	Until *regexp.Regexp
}

// Start starts sowd and waits for its banner; the test's cleanup stops it.
func Start(t testing.TB, o Options) *Sowd {
	t.Helper()
	dir := t.TempDir()
	if o.Config == "" {
		o.Config = TestConfig(t)
	}
	cfg := filepath.Join(dir, "sowd.toml")
	if err := os.WriteFile(cfg, []byte(o.Config), 0o644); err != nil {
		t.Fatal(err)
	}
	if o.DataDir == "" {
		o.DataDir = filepath.Join(dir, "data")
	}
	until := banner
	if o.Until != nil {
		until = o.Until
	}
	cmd := pythonModule("sowdb.testing", append([]string{"--data-dir", o.DataDir, "--config", cfg}, o.Args...)...)
	cmd.Env = append(cmd.Env, o.Env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Sowd{DataDir: o.DataDir, cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.out.WriteString(line + "\n")
			s.mu.Unlock()
			if m := until.FindStringSubmatch(line); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(s.Stop)
	select {
	case s.Address = <-found:
		return s
	case <-s.exited:
		t.Fatalf("sowd exited before serving:\n%s", s.Output())
	case <-time.After(60 * time.Second):
		s.Stop()
		t.Fatalf("sowd did not start in 60 s:\n%s", s.Output())
	}
	return nil
}

// Stop stops the server (SIGTERM to the launcher, which stops sowd; SIGKILL after 10 s).
func (s *Sowd) Stop() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// Exited is closed once the launcher has ended.
func (s *Sowd) Exited() <-chan struct{} { return s.exited }

// String is the address, for messages.
func (s *Sowd) String() string { return fmt.Sprintf("sowd at %s", s.Address) }

// Kill9 is `kill -9` of sowd itself (not its launcher), as a crash; it returns once it is gone
// (the launcher ends when its sowd does).
func (s *Sowd) Kill9(t testing.TB) {
	t.Helper()
	pid := s.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil || len(strings.Fields(string(b))) == 0 {
		t.Fatalf("no sowd under launcher %d: %v", pid, err)
	}
	var child int
	fmt.Sscan(strings.Fields(string(b))[0], &child)
	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the launcher did not end after its sowd was killed")
	}
}

// StartShared starts a server that outlives the test that asked first (a package's tests share
// it; the caller stops it, in TestMain).
func StartShared(t testing.TB, o Options) *Sowd {
	return Start(noCleanup{t}, o)
}

// noCleanup is a testing.TB whose cleanups are dropped, and whose temporary directories are the
// process's own (removed by Exit).
type noCleanup struct{ testing.TB }

func (noCleanup) Cleanup(func()) {}

func (noCleanup) TempDir() string {
	d, err := os.MkdirTemp("", "sowdb-go-")
	if err != nil {
		panic(err)
	}
	sharedDirs = append(sharedDirs, d)
	return d
}

var sharedDirs []string

// Exit removes the shared servers' directories and exits with code (for TestMain).
func Exit(code int) {
	for _, d := range sharedDirs {
		_ = os.RemoveAll(d)
	}
	os.Exit(code)
}
