package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// engine is the real nats-server, one node with JetStream on file storage, run in
// the simulation's bubble: its goroutines and timers run on the bubble's virtual
// clock, so an AckWait or a duplicate window passes in no real time, and every engine
// fact the protocol meets is the engine's own, not a model's. Clients reach it
// through in-process pipes that the simulation can stall, cut or close for good
// (faultConn).
type engine struct {
	dir string

	// restarted, when set, is called after a restart while only privileged
	// clients may connect; the others connect once it returns.
	restarted func()

	mu    sync.Mutex
	srv   *server.Server // nil while crashed
	open  bool           // clients other than privileged ones may connect
	conns []*faultConn   // every client connection made, to cut on a crash
}

func startEngine(dir string) (*engine, error) {
	e := &engine{dir: dir}
	return e, e.start()
}

func (e *engine) start() error {
	opts := &server.Options{
		JetStream: true, StoreDir: e.dir, DontListen: true, NoLog: true, NoSigs: true,
		ServerName: "sim", MaxPayload: 1 << 20,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		return errors.New("sim: the server did not start")
	}
	e.mu.Lock()
	e.srv = s
	e.open = e.restarted == nil
	e.mu.Unlock()
	return nil
}

// crash stops the server (called from the bubble's root goroutine only) the way a SIGKILL does: the store keeps what the server had
// written to its files at that instant, nothing it would have flushed on a clean
// stop (consumer state, the write buffers), and every client loses its connection
// with the replies it was waiting for. The server restarts on that store after down.
func (e *engine) crash(down time.Duration) error {
	// The clients go first: no write is acknowledged after the image is taken, as
	// none is after a SIGKILL. What the server read and had not yet stored lands in
	// the image or not, its reply lost either way.
	e.mu.Lock()
	s := e.srv
	e.srv = nil
	conns := e.conns
	e.conns = nil
	e.mu.Unlock()
	for _, c := range conns {
		if !c.privileged {
			c.cut()
		}
	}
	// Let the server finish what it read before the cut (it lands, its reply
	// lost), and the simulation's connection receive the revisions that stored
	// (history_test.go), so that the image is one instant of the store (a SIGKILL
	// leaves no file newer than another) and the history holds what it holds.
	synctest.Wait()
	for _, c := range conns {
		c.cut()
	}
	image := e.dir + ".crash"
	if err := os.RemoveAll(image); err != nil {
		return err
	}
	if err := copyDir(e.dir, image); err != nil {
		return fmt.Errorf("sim: the crash image: %w", err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	if err := os.RemoveAll(e.dir); err != nil {
		return err
	}
	if err := os.Rename(image, e.dir); err != nil {
		return err
	}
	time.Sleep(down)
	if err := e.start(); err != nil {
		return err
	}
	if e.restarted != nil {
		e.restarted()
	}
	e.mu.Lock()
	e.open = true
	e.mu.Unlock()
	return nil
}

func (e *engine) stop() {
	e.mu.Lock()
	s := e.srv
	e.srv = nil
	e.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// client is one process's way to the server: its connections pass through a
// faultConn each, and the simulation can freeze them, cut them, or kill the client
// (no connection ever again).
type client struct {
	e          *engine
	name       string
	privileged bool // connects while the others wait after a restart (the simulation's own)

	mu     sync.Mutex
	cur    *faultConn
	frozen chan struct{} // closed while running; open while frozen
	dead   bool
}

func (e *engine) newClient(name string) *client {
	c := &client{e: e, name: name, frozen: make(chan struct{})}
	close(c.frozen)
	return c
}

// InProcessConn is nats.InProcessConnProvider: a new pipe to the server running now.
func (c *client) InProcessConn() (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return nil, errors.New("sim: the process is dead")
	}
	if c.isFrozen() {
		return nil, errors.New("sim: the process is frozen")
	}
	c.e.mu.Lock()
	s, open := c.e.srv, c.e.open
	c.e.mu.Unlock()
	if s == nil || !open && !c.privileged {
		return nil, errors.New("sim: the server is down")
	}
	nc, err := s.InProcessConn()
	if err != nil {
		return nil, err
	}
	fc := newFaultConn(nc, c.isFrozen())
	fc.privileged = c.privileged
	c.cur = fc
	c.e.mu.Lock()
	c.e.conns = append(c.e.conns, fc)
	c.e.mu.Unlock()
	return fc, nil
}

// connect opens a NATS connection of the client that reconnects for ever.
func (c *client) connect() (*nats.Conn, error) {
	return nats.Connect("", nats.InProcessServer(c), nats.Name(c.name),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectJitter(0, 0),
		nats.RetryOnFailedConnect(true),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // cut connections are the point
}

// gate returns the channel that is closed while the client runs.
func (c *client) gate() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen
}

// isFrozen reports whether the client is frozen; the caller holds c.mu.
func (c *client) isFrozen() bool {
	select {
	case <-c.frozen:
		return false
	default:
		return true
	}
}

// freeze stalls the client: nothing it sends or receives moves (a GC pause, a
// stalled link, a stopped process) until thaw.
func (c *client) freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.frozen:
		c.frozen = make(chan struct{})
	default:
	}
	if c.cur != nil {
		c.cur.setFrozen(true)
	}
}

func (c *client) thaw() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.frozen:
	default:
		close(c.frozen)
	}
	if c.cur != nil {
		c.cur.setFrozen(false)
	}
}

// cut closes the client's connection (a reset link): what it had sent and was not
// read is lost, and so are the replies on their way. It reconnects.
func (c *client) cut() {
	c.mu.Lock()
	fc := c.cur
	c.mu.Unlock()
	if fc != nil {
		fc.cut()
	}
}

// kill is a process's death: its connection closes and it never connects again.
func (c *client) kill() {
	c.mu.Lock()
	c.dead = true
	fc := c.cur
	c.mu.Unlock()
	c.thaw()
	if fc != nil {
		fc.cut()
	}
}

// faultConn is one client connection, pumped both ways through buffers of its own
// so that neither the client nor the server ever blocks on it: a writer blocked
// under a lock would stop the bubble's clock (a goroutine waiting on a mutex is not
// durably blocked), and so would a server writing to a client that does not read.
// While its client is frozen nothing moves either way; what is sent meanwhile waits,
// as in a stalled link's buffers. cut closes it.
type faultConn struct {
	net.Conn
	mu     sync.Mutex
	moved  *sync.Cond // signalled on every change below
	frozen bool
	closed bool
	out    []byte // written by the client, not yet sent
	in     []byte // sent by the server, not yet read by the client
	inErr  error  // the server's side ended
	ready  bool   // the handshake is over (the server's first PONG came): from now on a freeze stalls reads

	privileged bool // its client's (client.privileged)
}

func newFaultConn(c net.Conn, frozen bool) *faultConn {
	f := &faultConn{Conn: c, frozen: frozen}
	f.moved = sync.NewCond(&f.mu)
	go f.send()
	go f.receive()
	return f
}

func (f *faultConn) send() {
	for {
		f.mu.Lock()
		for !f.closed && (f.frozen || len(f.out) == 0) {
			f.moved.Wait()
		}
		if f.closed {
			f.mu.Unlock()
			return
		}
		data := f.out
		f.out = nil
		f.mu.Unlock()
		if _, err := f.Conn.Write(data); err != nil {
			f.cut()
			return
		}
	}
}

func (f *faultConn) receive() {
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Conn.Read(buf)
		f.mu.Lock()
		f.in = append(f.in, buf[:n]...)
		if !f.ready && bytes.Contains(f.in, []byte("PONG\r\n")) {
			// The client reads the handshake's replies holding its connection's
			// lock: stalled then, it would stop the bubble's clock.
			f.ready = true
		}
		if err != nil {
			f.inErr = err
		}
		f.moved.Broadcast()
		f.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (f *faultConn) Read(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for !f.closed && f.inErr == nil && (f.frozen && f.ready || len(f.in) == 0) {
		f.moved.Wait()
	}
	if f.closed {
		return 0, net.ErrClosed
	}
	if len(f.in) == 0 {
		return 0, f.inErr
	}
	n := copy(b, f.in)
	f.in = f.in[n:]
	return n, nil
}

func (f *faultConn) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, net.ErrClosed
	}
	f.out = append(f.out, b...)
	f.moved.Broadcast()
	return len(b), nil
}

// The client's deadlines do not apply: the pumps read and write the pipe, and a
// deadline set for the handshake would end the pump's read.
func (f *faultConn) SetDeadline(time.Time) error      { return nil }
func (f *faultConn) SetReadDeadline(time.Time) error  { return nil }
func (f *faultConn) SetWriteDeadline(time.Time) error { return nil }

func (f *faultConn) Close() error {
	f.cut()
	return nil
}

func (f *faultConn) setFrozen(on bool) {
	f.mu.Lock()
	f.frozen = on
	f.moved.Broadcast()
	f.mu.Unlock()
}

func (f *faultConn) cut() {
	f.mu.Lock()
	already := f.closed
	f.closed = true
	f.moved.Broadcast()
	f.mu.Unlock()
	if !already {
		_ = f.Conn.Close()
	}
}

// copyDir copies the tree at src to dst as the files are now.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed as we walked: a SIGKILL would not have it either
			}
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}
