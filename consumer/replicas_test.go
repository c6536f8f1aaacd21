package consumer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/testenv"
)

func TestReplicasOnASingleNodeSayItNeedsACluster(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	h := consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil })
	_, err := consumer.New(testenv.Context(t, 10*time.Second), env.JetStream(t), "emails", h, consumer.Replicas(3))
	if !errors.Is(err, consumer.ErrNeedsCluster) || !strings.Contains(err.Error(), "queue emails") ||
		!strings.Contains(err.Error(), "3 replicas needs a cluster of at least 3 nodes") {
		t.Fatalf("New with Replicas(3) on one node: %v, want ErrNeedsCluster saying it needs a cluster of 3 nodes", err)
	}
}
