package queue

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/testenv"
)

// wantNeedsCluster fails unless err is ErrNeedsCluster, still wraps the server's
// API error, and its message holds every one of parts.
func wantNeedsCluster(t *testing.T, err error, parts ...string) {
	t.Helper()
	var api *jetstream.APIError
	if !errors.Is(err, ErrNeedsCluster) || !errors.As(err, &api) {
		t.Fatalf("err = %v, want ErrNeedsCluster wrapping the server's API error", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error does not mention %q: %v", p, err)
		}
	}
}

func TestReplicasOnASingleNodeNeedACluster(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)

	_, err := Provision(testenv.Context(t, 10*time.Second), js, mustNames(t, "replicated"), Config{Replicas: 3})
	wantNeedsCluster(t, err, "queue replicated", "3 replicas", "needs a cluster of at least 3 nodes", "single node")

	// One replica, asked or not, is what a single node holds.
	for _, r := range []int{0, 1} {
		if _, err := Provision(testenv.Context(t, 10*time.Second), js, mustNames(t, "single"), Config{Replicas: r}); err != nil {
			t.Fatalf("Replicas %d on a single node: %v", r, err)
		}
	}
}

func TestReplicasBeyondTheClusterNeedABiggerCluster(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	js := cl.JetStream(t)

	_, err := Provision(testenv.Context(t, 20*time.Second), js, mustNames(t, "wide"), Config{Replicas: 5})
	wantNeedsCluster(t, err, "queue wide", "5 replicas", "needs a cluster of at least 5 nodes")
	if _, err := Provision(testenv.Context(t, 20*time.Second), js, mustNames(t, "fits"), Config{Replicas: 3}); err != nil {
		t.Fatalf("Replicas 3 on 3 nodes: %v", err)
	}
}
