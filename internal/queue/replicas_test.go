package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/retry"
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

// For a moment after a cluster starts or its meta leader changes, the leader has not
// heard every node's statistics and refuses to place replicas: "no suitable peers for
// placement, peer offline" (seen under load right after StartCluster). Provisioning
// tries again for retry.PlacementGrace, then gives up with the server's error; other
// refusals are not retried.
func TestRetryPlacementWaitsOutOfflinePeers(t *testing.T) {
	t.Parallel()
	offline := &jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement, peer offline"}
	tooFew := &jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement"}
	ctx := testenv.Context(t, 30*time.Second)

	calls := 0
	err := retry.Placement(ctx, func(context.Context) error {
		if calls++; calls < 3 {
			return offline
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls; want success on the third", err, calls)
	}

	calls = 0
	if err := retry.Placement(ctx, func(context.Context) error { calls++; return tooFew }); !errors.Is(err, tooFew) || calls != 1 {
		t.Fatalf("too few peers: err %v after %d calls; want it at once", err, calls)
	}

	start := time.Now()
	if err := retry.Placement(ctx, func(context.Context) error { return offline }); !errors.Is(err, offline) {
		t.Fatalf("err %v, want the server's refusal after the grace", err)
	}
	if took := time.Since(start); took < retry.PlacementGrace || took > retry.PlacementGrace+5*time.Second {
		t.Errorf("gave up after %s; want about %s", took, retry.PlacementGrace)
	}
}
