package embedded_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/embedded"
	"github.com/workq/workq/testenv"
)

// run starts a server for the test and closes it when the test ends.
func run(t *testing.T, opts ...embedded.Option) *embedded.Server {
	t.Helper()
	s, err := embedded.Run(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// jetStream connects to url with opts for the test.
func jetStream(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// wantSyncAlways fails unless the running server's JetStream fsyncs every write
// exactly when want says so.
func wantSyncAlways(t *testing.T, srv *server.Server, want bool) {
	t.Helper()
	if srv == nil {
		t.Fatal("server not running")
	}
	if got := srv.JetStreamConfig().SyncAlways; got != want {
		t.Fatalf("server %s: JetStream SyncAlways = %v, want %v", srv.Name(), got, want)
	}
}

// wantStoreIn fails unless the running server's JetStream store is inside dir, which
// exists.
func wantStoreIn(t *testing.T, srv *server.Server, dir string) {
	t.Helper()
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("store directory %s: %v", dir, err)
	}
	got := srv.JetStreamConfig().StoreDir
	if rel, err := filepath.Rel(dir, got); err != nil || !filepath.IsLocal(rel) {
		t.Fatalf("server %s stores in %s, want inside %s", srv.Name(), got, dir)
	}
}

func haveShm() bool {
	st, err := os.Stat("/dev/shm")
	return err == nil && st.IsDir()
}

// waitForStream waits until stream answers through js (after a restart, once the
// client has reconnected) and returns its state. Each try has its own short
// deadline: a request sent before the client noticed the restart is lost.
func waitForStream(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string) jetstream.StreamState {
	t.Helper()
	for {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := js.Stream(tctx, stream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = s.Info(tctx)
		}
		cancel()
		if err == nil {
			return info.State
		}
		if ctx.Err() != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// storeOne creates a file-storage stream named stream, on the subject of the same
// name, and stores one message in it.
func storeOne(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string) {
	t.Helper()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, stream, []byte("x")); err != nil {
		t.Fatal(err)
	}
}

func TestRestartKeepsPortAndFileStreams(t *testing.T) {
	t.Parallel()
	s := run(t, embedded.SyncAlways(), embedded.TmpfsStore())
	wantSyncAlways(t, s.NATS(), true)
	js := jetStream(t, s.URL())
	ctx := testenv.Context(t, 30*time.Second)
	storeOne(t, ctx, js, "S")
	url := s.URL()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.URL() != url {
		t.Fatalf("URL changed across restart: %s -> %s", url, s.URL())
	}
	// The old connection reconnects by itself, to the same port.
	if st := waitForStream(t, ctx, js, "S"); st.Msgs != 1 {
		t.Fatalf("messages after restart = %d, want 1", st.Msgs)
	}
	wantSyncAlways(t, s.NATS(), true)
}

// With no options: loopback, a free port, a new temporary store on disk that Close
// removes, lazy fsync.
func TestRunDefaults(t *testing.T) {
	t.Parallel()
	s, err := embedded.Run()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := s.StoreDir()
	wantStoreIn(t, s.NATS(), dir)
	if rel, err := filepath.Rel(os.TempDir(), dir); err != nil || !filepath.IsLocal(rel) {
		t.Errorf("default store %s: want it under os.TempDir %s", dir, os.TempDir())
	}
	wantSyncAlways(t, s.NATS(), false) // the default fsyncs in the background
	if !strings.HasPrefix(s.URL(), "nats://127.0.0.1:") || strings.HasSuffix(s.URL(), ":0") {
		t.Errorf("URL %s: want nats://127.0.0.1 on the port picked", s.URL())
	}
	if s.RouteURL() != "" || s.ClientOptions() != nil {
		t.Errorf("RouteURL %q, ClientOptions %v: want none for a single server without auth", s.RouteURL(), s.ClientOptions())
	}
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()

	s.Stop()
	if s.NATS() != nil {
		t.Fatal("server still set after Stop")
	}
	if _, err := nats.Connect(s.URL(), nats.Timeout(time.Second)); err == nil {
		t.Fatal("connected after Stop")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("store after Stop: %v, want it kept until Close", err)
	}
	s.Close()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary store %s after Close: %v, want it removed", dir, err)
	}
}

func TestDirIsKept(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	s := run(t, embedded.Dir(dir))
	wantStoreIn(t, s.NATS(), dir)
	js := jetStream(t, s.URL())
	ctx := testenv.Context(t, 30*time.Second)
	storeOne(t, ctx, js, "K")
	s.Close()
	// A new server on the same directory has the data.
	s2 := run(t, embedded.Dir(dir))
	if st := waitForStream(t, ctx, jetStream(t, s2.URL()), "K"); st.Msgs != 1 {
		t.Fatalf("messages in the kept store = %d, want 1", st.Msgs)
	}
}

func TestTmpfsStoreIsAFileStore(t *testing.T) {
	t.Parallel()
	s := run(t, embedded.TmpfsStore())
	if haveShm() {
		wantStoreIn(t, s.NATS(), "/dev/shm")
	}
	wantStoreIn(t, s.NATS(), s.StoreDir())
	js := jetStream(t, s.URL())
	st, err := js.CreateStream(testenv.Context(t, 10*time.Second), jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.Storage; got != jetstream.FileStorage {
		t.Fatalf("stream storage = %s, want file: TmpfsStore must not change a stream's storage", got)
	}
	// The stream's files are in the store directory.
	found := false
	err = filepath.WalkDir(s.StoreDir(), func(_ string, d fs.DirEntry, err error) error {
		found = found || err == nil && d.IsDir() && d.Name() == "F"
		return err
	})
	if err != nil || !found {
		t.Fatalf("stream F's directory not found under %s (walk: %v)", s.StoreDir(), err)
	}
}

// A port already taken is reported at once, as the listen error, not after a wait
// for readiness.
func TestPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	began := time.Now()
	s, err := embedded.Run(embedded.Port(port), embedded.TmpfsStore())
	if err == nil {
		s.Close()
		t.Fatal("Run on a port in use succeeded")
	}
	if took := time.Since(began); took > embedded.ReadyTimeout/2 {
		t.Errorf("Run took %s to fail, want at once", took)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if !errors.Is(err, syscall.EADDRINUSE) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Run on a port in use: %v; want an error wrapping EADDRINUSE naming %s", err, addr)
	}
}

// A Run that fails removes the temporary store it made. Not parallel: it points
// TMPDIR (where the store is made) at a directory of its own, to see it left empty.
func TestFailedRunLeavesNoStore(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if s, err := embedded.Run(embedded.Port(l.Addr().(*net.TCPAddr).Port)); err == nil {
		s.Close()
		t.Fatal("Run on a port in use succeeded")
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("a failed Run left %s in the temporary directory", left[0].Name())
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	s := run(t, embedded.TmpfsStore(), embedded.MaxMemory(64<<20), embedded.MaxStore(128<<20))
	cfg := s.NATS().JetStreamConfig()
	if cfg.MaxMemory != 64<<20 || cfg.MaxStore != 128<<20 {
		t.Fatalf("JetStream limits: memory %d, store %d; want %d, %d", cfg.MaxMemory, cfg.MaxStore, 64<<20, 128<<20)
	}
}

// Every bad option is reported by Run, as an error wrapping ErrInvalidOption that
// names the option.
func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, c := range []struct {
		name string
		opts []embedded.Option
		want string
	}{
		{"negative port", []embedded.Option{embedded.Port(-1)}, "Port -1"},
		{"port too high", []embedded.Option{embedded.Port(65536)}, "Port 65536"},
		{"user and token", []embedded.Option{embedded.UserPassword("u", "p"), embedded.Token("t")}, "UserPassword and Token"},
		{"password without user", []embedded.Option{embedded.UserPassword("", "p")}, "empty user"},
		{"TLS files missing", []embedded.Option{embedded.TLSFiles(missing, missing)}, "missing.pem"},
		{"TLS key file not given", []embedded.Option{embedded.TLSFiles(missing, "")}, "want both"},
		{"TLS config without certificate", []embedded.Option{embedded.TLS(&tls.Config{})}, "no certificate"},
		{"routes without cluster", []embedded.Option{embedded.Routes("nats://127.0.0.1:6222")}, "without ClusterName"},
		{"route port without cluster", []embedded.Option{embedded.RoutePort(6222)}, "without ClusterName"},
		{"cluster without name", []embedded.Option{embedded.ClusterName("c")}, "without Name"},
		{"cluster without routes", []embedded.Option{embedded.ClusterName("c"), embedded.Name("a")}, "without Routes"},
		{"bad route", []embedded.Option{embedded.ClusterName("c"), embedded.Name("a"), embedded.Routes("nats://:x")}, "want nats://host:port"},
		{"route without port", []embedded.Option{embedded.ClusterName("c"), embedded.Name("a"), embedded.Routes("nats://127.0.0.1")}, "want nats://host:port"},
		{"route port too high", []embedded.Option{embedded.ClusterName("c"), embedded.Name("a"), embedded.Routes("127.0.0.1:6222"), embedded.RoutePort(70000)}, "RoutePort 70000"},
		{"negative limit", []embedded.Option{embedded.MaxStore(-1)}, "MaxStore -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := embedded.Run(c.opts...)
			if err == nil {
				s.Close()
				t.Fatal("Run succeeded")
			}
			if !errors.Is(err, embedded.ErrInvalidOption) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v; want ErrInvalidOption saying %q", err, c.want)
			}
		})
	}
	// The cause of a file error stays visible.
	_, err := embedded.Run(embedded.TLSFiles(missing, missing))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("TLSFiles with missing files: %v, want it to wrap fs.ErrNotExist", err)
	}
}
