package consumer

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/workq/workq/internal/queue"
)

// While a level's consumer is unusable (an incompatible one took its place), a pull
// that fails for another reason leaves the worker's health saying why it cannot pull:
// the pull opened on the replaced consumer ends in "no heartbeat" after the
// incompatibility was found, and once overwrote it (a CI failure of
// TestIncompatibleConsumerMakesWorkerUnhealthy on a loaded machine).
func TestFailedPullKeepsTheIncompatibleConsumerReason(t *testing.T) {
	t.Parallel()
	s := &source{}
	w := &Worker{sources: []*source{s}, log: slog.New(slog.DiscardHandler)}
	incompatible := fmt.Errorf("consumer workers: %w", queue.ErrIncompatible)
	s.unusable.Store(true)
	w.unhealthy(incompatible, true)
	w.pullFailed(errors.New("nats: no heartbeat received"))
	if err := w.Health(); !errors.Is(err, queue.ErrIncompatible) {
		t.Fatalf("Health %v after a failed pull; want the incompatible consumer", err)
	}
	// Once the consumer is mended, failed pulls say so again.
	s.unusable.Store(false)
	w.pullFailed(errors.New("nats: no heartbeat received"))
	if err := w.Health(); err == nil || errors.Is(err, queue.ErrIncompatible) {
		t.Fatalf("Health %v after a failed pull on a usable consumer", err)
	}
}
