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
	return turnOn(ctx, js, cfg, func(c *jetstream.StreamConfig) *bool { return &c.AllowAtomicPublish })
}

// allowMsgTTL turns on TTLs per message on the stream of config cfg if they are off,
// and reports whether the stream takes them: a workflow's waiting task is written to
// never expire, whatever the bucket's TTL. As with allowAtomic, failures are not
// errors (only workflows need it, and say so), and the update happens once per queue.
func allowMsgTTL(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) bool {
	return turnOn(ctx, js, cfg, func(c *jetstream.StreamConfig) *bool { return &c.AllowMsgTTL })
}

// turnOn sets the setting flag points at in cfg, updating the stream if it was off,
// and reports whether the stream has it on.
func turnOn(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, flag func(*jetstream.StreamConfig) *bool) bool {
	if *flag(&cfg) {
		return true
	}
	*flag(&cfg) = true
	s, err := js.UpdateStream(ctx, cfg)
	if err != nil {
		return false
	}
	got := s.CachedInfo().Config
	return *flag(&got)
}
