package sowdtest

import (
	"fmt"
	"regexp"
	"testing"
)

// Proxy is a TCP proxy to a server, through the project's one fault proxy (`python -m
// sowdb.testing.faultproxy`), whose link can go slow, silent or broken on demand. Silent is a
// partition or a blackholed host: the connections stay open but no byte passes, either way, so
// that only keepalives can tell the client that its server is gone.
type Proxy struct {
	Address string
	l       *launched
}

var proxyBanner = regexp.MustCompile(`^proxy listening on (\S+)$`)

// StartProxy starts a proxy to target (HOST:PORT), forwarding; the test's cleanup closes the
// launcher's standard input, on which it closes the proxy and its connections.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, address := launch(t, "sowdb.testing.faultproxy", proxyBanner, "--target", target)
	return &Proxy{Address: address, l: l}
}

// GoSilent makes every connection pass nothing more, either way, and keeps them open (the
// proxy's blackhole); it returns once that is in effect.
func (p *Proxy) GoSilent(t testing.TB) {
	t.Helper()
	p.l.command(t, "blackhole", "ok blackhole")
}

// Forward lets bytes pass again, each chunk after delay seconds (0: at once); what was held
// while silent flows on.
func (p *Proxy) Forward(t testing.TB, delay float64) {
	t.Helper()
	p.l.command(t, fmt.Sprintf("forward %g", delay), "ok forward")
}

// Cut closes every connection, and each new one as soon as it is accepted.
func (p *Proxy) Cut(t testing.TB) {
	t.Helper()
	p.l.command(t, "cut", "ok cut")
}

// Close ends the proxy and its connections.
func (p *Proxy) Close() { p.l.stop() }
