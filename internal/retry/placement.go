package retry

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// PlacementGrace is how long provisioning keeps trying while the server cannot
// place a stream's replicas because a peer is offline. The meta leader counts a node
// offline until it hears the node's statistics: for a moment after the node starts or
// rejoins, and when a loaded machine delays them. A cluster that is really too small
// for the replicas fails at once; one with a node down fails after this grace.
const PlacementGrace = 5 * time.Second

// Placement runs op as retry.Do does, and again every 250ms for up to
// PlacementGrace while it fails with "no suitable peers ... peer offline".
func Placement(ctx context.Context, op func(ctx context.Context) error) error {
	deadline := time.Now().Add(PlacementGrace)
	for {
		err := Do(ctx, op)
		if err == nil || !peerOffline(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// peerOffline reports whether err is the server failing to place replicas because
// a peer it knows is offline.
func peerOffline(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == 10005 && strings.Contains(api.Description, "peer offline")
}
