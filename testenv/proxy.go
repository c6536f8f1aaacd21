package testenv

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/faultproxy"
)

// Proxy is a TCP proxy in front of a server for fault injection: Pause stops traffic
// in both directions without closing anything (a stalled link or a frozen peer, as
// far as the other side can tell), Resume lets it flow again, and Cut closes every
// connection (a crashed peer or a reset link).
type Proxy struct {
	p *faultproxy.Proxy
}

// StartProxy runs a Proxy on a free loopback port, forwarding to target (host:port
// or a nats:// URL), for the test; it is closed when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := faultproxy.New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &Proxy{p: p}
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string { return p.p.URL() }

// Conn connects through the proxy as Env.Conn connects to a server (reconnecting
// forever every 50ms, closed when the test ends), without credentials: put the proxy
// in front of a server without auth.
func (p *Proxy) Conn(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return connect(t, p.URL(), opts...)
}

// JetStream returns a JetStream context on a new connection from Conn.
func (p *Proxy) JetStream(t testing.TB, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	return newJS(t, p.Conn(t, opts...))
}

// Pause stops forwarding; bytes sent meanwhile wait (in the proxy and the kernel)
// until Resume.
func (p *Proxy) Pause() { p.p.Pause() }

// Resume forwards again, delivering what waited.
func (p *Proxy) Resume() { p.p.Resume() }

// PauseReplies stops forwarding what the server sends, only: a request reaches the
// server and its reply waits until ResumeReplies, or is lost with a Cut (a reply
// lost with a failing link).
func (p *Proxy) PauseReplies() { p.p.PauseReplies() }

// ResumeReplies forwards what the server sends again.
func (p *Proxy) ResumeReplies() { p.p.ResumeReplies() }

// Cut closes every proxied connection; new ones are still accepted.
func (p *Proxy) Cut() { p.p.Cut() }

// Close stops the proxy and closes its connections (StartProxy does it when the test
// ends).
func (p *Proxy) Close() { p.p.Close() }
