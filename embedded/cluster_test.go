package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/embedded"
	"github.com/workq/workq/testenv"
)

// Three servers started one by one with the cluster options, each given the route
// URLs of all three, form one JetStream cluster that places a replicated stream on
// all three nodes.
func TestNodesJoinThroughClusterOptions(t *testing.T) {
	t.Parallel()
	var routePorts []int
	var routes []string
	for range 3 {
		p, err := embedded.FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		routePorts = append(routePorts, p)
		routes = append(routes, "127.0.0.1:"+strconv.Itoa(p)) // host:port means nats://host:port
	}
	var nodes []*embedded.Server
	for i := range 3 {
		s := run(t, embedded.Name(fmt.Sprintf("node-%d", i)), embedded.ClusterName("joined"),
			embedded.RoutePort(routePorts[i]), embedded.Routes(routes...), embedded.TmpfsStore())
		if want := "nats://" + routes[i]; s.RouteURL() != want {
			t.Fatalf("node %d: RouteURL %q, want %q", i, s.RouteURL(), want)
		}
		nodes = append(nodes, s)
	}
	js := jetStream(t, nodes[0].URL())
	ctx := testenv.Context(t, 60*time.Second)
	// The stream can be placed once a meta leader is elected and knows every node;
	// until then a request may go unanswered, so each try has a short deadline.
	var st jetstream.Stream
	var err error
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err = js.CreateStream(cctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3})
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		t.Logf("create the R3 stream: %v (trying again)", err)
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create an R3 stream on the joined nodes: %v", err)
	}
	info := st.CachedInfo()
	if info.Cluster == nil || info.Cluster.Name != "joined" || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info %+v: want cluster joined, a leader and 2 replicas", info.Cluster)
	}
	if _, err := js.Publish(ctx, "r3", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Every node can serve it: through the last one joined.
	if st := waitForStream(t, ctx, jetStream(t, nodes[2].URL()), "R3"); st.Msgs != 1 {
		t.Fatalf("messages seen through node 2 = %d, want 1", st.Msgs)
	}
}

func TestClusterStoreOptions(t *testing.T) {
	t.Parallel()
	t.Run("memory store and sync always", func(t *testing.T) {
		cl, err := embedded.RunCluster(3, embedded.TmpfsStore(), embedded.SyncAlways())
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
	cl, err := embedded.RunCluster(3, embedded.TmpfsStore(), embedded.UserPassword("u", "p"))
	if err != nil {
		t.Fatal(err)
	}
	dir := cl.StoreDir()
	defer func() {
		cl.Close()
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("temporary cluster store %s after Close: %v, want it removed", dir, err)
		}
	}()
	for i := range cl.Size() {
		wantStoreIn(t, cl.Node(i), dir)
	}
	js := jetStream(t, cl.URL(), cl.ClientOptions()...)
	ctx := testenv.Context(t, 60*time.Second)
	createReplicated(t, ctx, js, jetstream.StreamConfig{Name: "R", Subjects: []string{"r"}, Replicas: 3})
	leader := cl.StreamLeader("R")
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	cl.Stop(leader)
	if cl.Node(leader) != nil {
		t.Fatalf("node %d still set after Stop", leader)
	}
	// The stream keeps accepting writes on the remaining two nodes.
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(pctx, "r", []byte("x"))
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("publish with node %d down: %v", leader, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cl.Restart(leader); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitForLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := cl.Server(leader).URL(); got != cl.URLs()[leader] {
		t.Fatalf("node %d URL %s, URLs %v", leader, got, cl.URLs())
	}
}

// A cluster needs two nodes at least: one alone never elects a meta leader, so
// RunCluster refuses it at once instead of timing out.
func TestRunClusterRefusesOneNode(t *testing.T) {
	t.Parallel()
	for _, n := range []int{-1, 0, 1} {
		if cl, err := embedded.RunCluster(n); !errors.Is(err, embedded.ErrInvalidOption) || !strings.Contains(err.Error(), "at least 2") {
			if cl != nil {
				cl.Close()
			}
			t.Errorf("RunCluster(%d): %v, want an error asking for 2 nodes", n, err)
		}
	}
}

// createReplicated creates a replicated stream, sending the request again when it
// goes unanswered for 10 s (the same config again is answered with the stream). A
// node answers a replicated create when it becomes the new stream's leader, and
// marks it answered at its first leader change either way, a step-down included
// (nats-server's processStreamLeaderChange): when leadership moves early, the create
// can go unanswered. One on a loaded CI machine waited out its 60 s.
func createReplicated(t *testing.T, ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) {
	t.Helper()
	for {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := js.CreateStream(tctx, cfg)
		cancel()
		switch {
		case err == nil:
			return
		case ctx.Err() != nil:
			t.Fatalf("create stream %s: %v", cfg.Name, err)
		case errors.Is(err, context.DeadlineExceeded):
			t.Logf("create stream %s: no answer in 10 s; sending it again", cfg.Name)
		default:
			t.Fatalf("create stream %s: %v", cfg.Name, err)
		}
	}
}
