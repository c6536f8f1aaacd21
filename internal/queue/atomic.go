package queue

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// allowAtomic turns on atomic batch publishes (ADR-50) on the stream of config cfg
// if they are off, and reports whether the stream takes them. Group commit needs
// them; a stream that cannot have them (a server older than 2.12 drops the setting,
// a user without the right to update streams is refused) only means single writes,
// so failures are not errors. The update writes back the config as cfg read it: it
// happens once per queue (the first provisioning after this setting existed), so a
// concurrent change by an operator is overwritten at most then.
func allowAtomic(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) bool {
	if cfg.AllowAtomicPublish {
		return true
	}
	cfg.AllowAtomicPublish = true
	s, err := js.UpdateStream(ctx, cfg)
	return err == nil && s.CachedInfo().Config.AllowAtomicPublish
}
