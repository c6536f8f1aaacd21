package testenv_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/embedded"
	"github.com/workq/workq/testenv"
)

// storeDir is where the running server of env keeps its JetStream store.
func storeDir(t *testing.T, env *testenv.Env) string {
	t.Helper()
	srv := env.NATS()
	if srv == nil {
		t.Fatal("server not running")
	}
	return srv.JetStreamConfig().StoreDir
}

// inside says whether path is inside dir.
func inside(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// A test server stores in tmpfs unless the test asks for a directory.
func TestStartStoresInTmpfs(t *testing.T) {
	t.Parallel()
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		t.Skip("no /dev/shm on this machine: the store is in the temporary directory")
	}
	if got := storeDir(t, testenv.Start(t)); !inside(got, "/dev/shm") {
		t.Errorf("testenv.Start stores in %s, want /dev/shm", got)
	}
	dir := t.TempDir()
	if got := storeDir(t, testenv.Start(t, embedded.Dir(dir))); !inside(got, dir) {
		t.Errorf("testenv.Start with embedded.Dir(%s) stores in %s", dir, got)
	}
}

// Conn and JetStream present the credentials the server was started with.
func TestConnCarriesCredentials(t *testing.T) {
	t.Parallel()
	for _, opt := range []embedded.Option{embedded.UserPassword("u", "p"), embedded.Token("t")} {
		env := testenv.Start(t, opt)
		if nc, err := nats.Connect(env.URL()); !errors.Is(err, nats.ErrAuthorization) {
			if nc != nil {
				nc.Close()
			}
			t.Fatalf("connect without credentials: %v, want authorization violation", err)
		}
		if _, err := env.JetStream(t).AccountInfo(testenv.Context(t, 10*time.Second)); err != nil {
			t.Fatalf("JetStream with the server's credentials: %v", err)
		}
	}
}

func TestClusterConnCarriesCredentials(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 2, embedded.Token("t"))
	if _, err := cl.JetStream(t).AccountInfo(testenv.Context(t, 10*time.Second)); err != nil {
		t.Fatalf("JetStream with the cluster's credentials: %v", err)
	}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && !inside(cl.StoreDir(), "/dev/shm") {
		t.Errorf("testenv.StartCluster stores in %s, want /dev/shm", cl.StoreDir())
	}
}

// The proxy forwards, holds traffic while paused, delivers it on Resume and drops
// connections on Cut.
func TestProxy(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	px := testenv.StartProxy(t, env.URL())
	disconnected := make(chan struct{}, 1)
	nc := env.Conn(t) // the server's own connection, to publish and count
	sub, err := nc.SubscribeSync("p")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	via := px.Conn(t, nats.DisconnectErrHandler(func(*nats.Conn, error) {
		select {
		case disconnected <- struct{}{}:
		default:
		}
	}))

	if err := via.Publish("p", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("message through the proxy: %v", err)
	}

	px.Pause()
	if err := via.Publish("p", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("message %q got through a paused proxy", m.Data)
	}
	px.Resume()
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("message held by the paused proxy, after Resume: %v", err)
	}

	px.Cut()
	select {
	case <-disconnected:
	case <-time.After(5 * time.Second):
		t.Fatal("the client was not disconnected by Cut")
	}
}
