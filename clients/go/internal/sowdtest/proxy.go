package sowdtest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// SilentProxy is a TCP proxy to a server that can go silent, as a partition or a blackholed host
// does: it keeps its connections open but passes nothing more on them, either way, so that only
// keepalives can tell the client that its server is gone.
type SilentProxy struct {
	Address string
	silent  atomic.Bool
	l       net.Listener
	mu      sync.Mutex
	conns   []net.Conn
}

// StartProxy starts a proxy to target; the test's cleanup closes it and its connections.
func StartProxy(t testing.TB, target string) *SilentProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &SilentProxy{Address: l.Addr().String(), l: l}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go p.pass(in, out)
			go p.pass(out, in)
		}
	}()
	t.Cleanup(p.Close)
	return p
}

// pass copies from one side to the other while the proxy is not silent; once silent, what
// arrives is read and dropped (the connection stays open, nothing comes through).
func (p *SilentProxy) pass(from, to net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := from.Read(buf)
		if n > 0 && !p.silent.Load() {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF && !p.silent.Load() {
				to.Close()
			}
			return
		}
	}
}

// GoSilent makes every connection pass nothing more, either way.
func (p *SilentProxy) GoSilent() { p.silent.Store(true) }

// Close ends the proxy and its connections.
func (p *SilentProxy) Close() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
