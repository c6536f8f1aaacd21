package producer_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// The README's first library line once asked for Replicas(3) against the quick
// start's single server; the error must say why that cannot work.
func TestReplicasOnASingleNodeSayItNeedsACluster(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	_, err := producer.New(testenv.Context(t, 10*time.Second), env.JetStream(t), "emails", producer.Replicas(3))
	if !errors.Is(err, producer.ErrNeedsCluster) {
		t.Fatalf("New with Replicas(3) on one node: %v, want ErrNeedsCluster", err)
	}
	for _, part := range []string{"queue emails", "3 replicas needs a cluster of at least 3 nodes"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error does not say %q: %v", part, err)
		}
	}
}
