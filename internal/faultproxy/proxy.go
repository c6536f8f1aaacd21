// Package faultproxy is a TCP proxy for fault injection: it stalls or cuts the link
// between a NATS client and its server on demand. Tests use it through testenv; the
// workq demo and benchmarks use it directly, without linking the testing package.
package faultproxy

import (
	"fmt"
	"net"
	"net/url"
	"sync"
)

// Proxy is a TCP proxy in front of a server for fault injection: Pause stops traffic
// in both directions without closing anything (a stalled link or a frozen peer, as
// far as the other side can tell), Resume lets it flow again, and Cut closes every
// connection (a crashed peer or a reset link). PauseReplies stops only what the
// server sends, so requests arrive and their replies wait (lost, if Cut follows).
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	paused bool
	resume chan struct{} // closed by Resume
	// The same for what the server sends alone (PauseReplies, ResumeReplies).
	repliesPaused bool
	repliesResume chan struct{}
	conns         map[net.Conn]struct{}
	closed        bool
	wg            sync.WaitGroup
}

// New listens on a free loopback port and forwards to target (host:port or a
// nats:// URL).
func New(target string) (*Proxy, error) {
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		target = u.Host
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen on a loopback port: %w", err)
	}
	p := &Proxy{ln: ln, target: target, resume: make(chan struct{}), repliesResume: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.resume)
	close(p.repliesResume)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string {
	return "nats://" + p.ln.Addr().String()
}

// Pause stops forwarding; bytes sent meanwhile wait (in the proxy and the kernel)
// until Resume.
func (p *Proxy) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		p.paused = true
		p.resume = make(chan struct{})
	}
}

// Resume forwards again, delivering what waited.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		p.paused = false
		close(p.resume)
	}
}

// PauseReplies stops forwarding what the server sends, leaving what clients send
// flowing: a request reaches the server and changes what it changes, and its reply
// waits until ResumeReplies, or is lost with a Cut.
func (p *Proxy) PauseReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.repliesPaused {
		p.repliesPaused = true
		p.repliesResume = make(chan struct{})
	}
}

// ResumeReplies forwards what the server sends again.
func (p *Proxy) ResumeReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.repliesPaused {
		p.repliesPaused = false
		close(p.repliesResume)
	}
}

// Cut closes every proxied connection; new ones are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Resume()
	p.ResumeReplies()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s, false)
		go p.pipe(s, c, true)
	}
}

// pipe copies from src to dst, holding each chunk while the proxy is paused, and
// while replies are paused when it carries what the server sends.
func (p *Proxy) pipe(src, dst net.Conn, fromServer bool) {
	defer p.wg.Done()
	defer func() {
		src.Close()
		dst.Close()
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate, replies := p.resume, p.repliesResume
			p.mu.Unlock()
			<-gate
			if fromServer {
				<-replies
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
