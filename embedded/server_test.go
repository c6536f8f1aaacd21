package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/embedded"
	"github.com/workq/workq/testenv"
)

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

func TestRestartKeepsFileStreams(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, embedded.SyncAlways())
	wantSyncAlways(t, env.NATS(), true)
	js := env.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s", []byte("x")); err != nil {
		t.Fatal(err)
	}
	url := env.URL()
	env.Restart(t)
	if env.URL() != url {
		t.Fatalf("URL changed across restart: %s -> %s", url, env.URL())
	}
	// The old connection reconnects by itself; wait for the stream through it. Each
	// try has its own short deadline: a request sent while the client had not yet
	// noticed the restart is lost, and would otherwise wait out the whole context.
	var info *jetstream.StreamInfo
	for {
		tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := js.Stream(tctx, "S")
		if err == nil {
			info, err = s.Info(tctx)
		}
		tcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("stream after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("messages after restart = %d, want 1", info.State.Msgs)
	}
	wantSyncAlways(t, env.NATS(), true)
}

func TestUserPassword(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, embedded.UserPassword("u", "p"), embedded.MemoryStore())
	_, err := nats.Connect(env.URL(), nats.UserInfo("u", "wrong"))
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: err = %v, want authorization violation", err)
	}
	nc := env.Conn(t)
	if !nc.IsConnected() {
		t.Fatal("not connected with the right password")
	}
}

func TestRunWithoutTesting(t *testing.T) {
	t.Parallel()
	s, err := embedded.Run()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dir := s.StoreDir()
	wantStoreIn(t, s.NATS(), dir)
	wantSyncAlways(t, s.NATS(), false) // the default fsyncs in the background
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Close()
	if s.NATS() != nil {
		t.Fatal("server still set after Close")
	}
	if _, err := nats.Connect(s.URL(), nats.Timeout(time.Second)); err == nil {
		t.Fatal("connected after Close")
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary store %s after Close: %v, want it removed", dir, err)
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

func TestMemoryStoreIsAFileStoreInTmpfs(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t, embedded.MemoryStore())
	if haveShm() {
		wantStoreIn(t, env.NATS(), "/dev/shm")
	}
	wantStoreIn(t, env.NATS(), env.StoreDir())
	js := env.JetStream(t)
	ctx := testenv.Context(t, 10*time.Second)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "F", Subjects: []string{"f"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Storage; got != jetstream.FileStorage {
		t.Fatalf("stream storage = %s, want file: MemoryStore must not change a stream's storage", got)
	}
	// The stream's files are in the store directory.
	found := false
	err = filepath.WalkDir(env.StoreDir(), func(_ string, d fs.DirEntry, err error) error {
		found = found || err == nil && d.IsDir() && d.Name() == "F"
		return err
	})
	if err != nil || !found {
		t.Fatalf("stream F's directory not found under %s (walk: %v)", env.StoreDir(), err)
	}
}

func TestClusterStoreOptions(t *testing.T) {
	t.Parallel()
	t.Run("memory store and sync always", func(t *testing.T) {
		cl, err := embedded.RunCluster(3, embedded.MemoryStore(), embedded.SyncAlways())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		dir := cl.StoreDir()
		for i := range cl.Size() {
			if haveShm() {
				wantStoreIn(t, cl.Node(i), "/dev/shm")
			}
			wantStoreIn(t, cl.Node(i), filepath.Join(dir, fmt.Sprintf("n%d", i)))
			wantSyncAlways(t, cl.Node(i), true)
		}
		cl.Close()
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("temporary cluster store %s after Close: %v, want it removed", dir, err)
		}
	})
	t.Run("dir", func(t *testing.T) {
		dir := t.TempDir()
		cl, err := embedded.RunCluster(3, embedded.Dir(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for i := range cl.Size() {
			wantStoreIn(t, cl.Node(i), filepath.Join(dir, fmt.Sprintf("n%d", i)))
			wantSyncAlways(t, cl.Node(i), false)
		}
		cl.Close()
		if st, err := os.Stat(filepath.Join(dir, "n0")); err != nil || !st.IsDir() {
			t.Fatalf("store given with Dir after Close: %v, want it kept", err)
		}
	})
}

func TestClusterStopAndRestartNode(t *testing.T) {
	t.Parallel()
	var dir string
	t.Cleanup(func() { // runs after the cluster's own cleanup has closed it
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("temporary cluster store %s after Close: %v, want it removed", dir, err)
		}
	})
	cl := testenv.StartCluster(t, 3)
	dir = cl.StoreDir()
	for i := range cl.Size() {
		wantStoreIn(t, cl.Node(i), dir)
	}
	js := cl.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	leader := cl.StreamLeader("R")
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	t.Logf("leader %d urls %v connected %s", leader, cl.URLs(), js.Conn().ConnectedUrl())
	cl.Stop(leader)
	// The stream keeps accepting writes on the remaining two nodes.
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(pctx, "r", []byte("x"))
		pcancel()
		if err == nil {
			break
		}
		t.Logf("publish: %v (connected to %s)", err, js.Conn().ConnectedUrl())
		if ctx.Err() != nil {
			t.Fatalf("publish with node %d down: %v", leader, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl.Restart(t, leader)
	if err := cl.WaitForLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if len(cl.URLs()) != 3 {
		t.Fatalf("URLs = %v", cl.URLs())
	}
}

// A cluster needs two nodes at least: one alone never elects a meta leader, so
// RunCluster refuses it at once instead of timing out.
func TestRunClusterRefusesOneNode(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, 0, 1} {
		if cl, err := embedded.RunCluster(n); err == nil || !strings.Contains(err.Error(), "at least 2") {
			if cl != nil {
				cl.Close()
			}
			t.Errorf("RunCluster(%d): %v, want an error asking for 2 nodes", n, err)
		}
	}
}
