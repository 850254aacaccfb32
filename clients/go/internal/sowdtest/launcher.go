package sowdtest

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// launched is one of the project's line-driven Python launchers (python -m sowdb.testing.etcd,
// python -m sowdb.testing.faultproxy): it prints a banner once ready, answers each command line
// on its standard input with one line, and stops what it runs when its standard input closes, so
// that a test binary that dies leaves nothing behind.
type launched struct {
	name   string
	cmd    interface{ Kill() error }
	stdin  io.WriteCloser
	lines  chan string // its standard output, a line at a time
	mu     sync.Mutex
	say    sync.Mutex // one command and its answer at a time
	stderr strings.Builder
	exited chan struct{}
}

func (l *launched) Write(b []byte) (int, error) { // its standard error, kept for messages
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stderr.Write(b)
}

func (l *launched) errors() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stderr.String()
}

// launch runs `python -m module args...` and waits for the banner's line; it returns the
// banner's first group. The test's cleanup stops it.
func launch(t testing.TB, module string, banner *regexp.Regexp, args ...string) (*launched, string) {
	t.Helper()
	cmd := pythonModule(module, args...)
	l := &launched{name: module, lines: make(chan string, 64), exited: make(chan struct{})}
	cmd.Stderr = l
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", module, err)
	}
	l.cmd, l.stdin = cmd.Process, stdin
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case l.lines <- sc.Text():
			default: // nobody asked for it: dropped
			}
		}
		_ = cmd.Wait()
		close(l.exited)
	}()
	t.Cleanup(l.stop)
	line, err := l.next(60 * time.Second)
	if err != nil {
		l.stop()
		t.Fatalf("%s did not start: %v\n%s", module, err, l.errors())
	}
	m := banner.FindStringSubmatch(line)
	if m == nil {
		l.stop()
		t.Fatalf("%s printed %q, not its banner\n%s", module, line, l.errors())
	}
	return l, m[1]
}

// next is the next line of its standard output.
func (l *launched) next(within time.Duration) (string, error) {
	select {
	case line := <-l.lines:
		return line, nil
	case <-l.exited:
		select { // a line printed just before it ended
		case line := <-l.lines:
			return line, nil
		default:
		}
		return "", fmt.Errorf("it ended")
	case <-time.After(within):
		return "", fmt.Errorf("no line in %s", within)
	}
}

// command writes a command line and waits for its answer, want (the launcher answers once the
// command is in effect).
func (l *launched) command(t testing.TB, command, want string) {
	t.Helper()
	l.say.Lock()
	defer l.say.Unlock()
	if _, err := io.WriteString(l.stdin, command+"\n"); err != nil {
		t.Fatalf("%s: %s: %v\n%s", l.name, command, err, l.errors())
	}
	got, err := l.next(10 * time.Second)
	if err != nil || got != want {
		t.Fatalf("%s answered %q (%v) to %q, want %q\n%s", l.name, got, err, command, want, l.errors())
	}
}

// stop closes its standard input, on which it stops what it runs and ends (SIGKILL after 20 s).
func (l *launched) stop() {
	_ = l.stdin.Close()
	select {
	case <-l.exited:
	case <-time.After(20 * time.Second):
		_ = l.cmd.Kill()
		<-l.exited
	}
}
