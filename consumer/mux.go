package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Mux routes jobs to handlers by kind (producer.Kind), or by Go type with RouteArgs
// (producer.EnqueueArgs). A job whose kind has no handler fails permanently with
// ErrUnknownKind and goes to dead letters with its payload, unless a default handler
// is set. The zero Mux is ready to use.
type Mux struct {
	mu       sync.RWMutex
	handlers map[string]Handler
	fallback Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: map[string]Handler{}} }

// Route registers h for kind; the empty kind matches jobs without one. A nil h
// removes kind's handler.
func (m *Mux) Route(kind string, h Handler) {
	if isNilFunc(h) {
		h = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h == nil {
		delete(m.handlers, kind)
		return
	}
	if m.handlers == nil {
		m.handlers = map[string]Handler{}
	}
	m.handlers[kind] = h
}

// RouteFunc registers f for kind. A nil f removes kind's handler.
func (m *Mux) RouteFunc(kind string, f func(ctx context.Context, j *Job) error) {
	m.Route(kind, HandlerFunc(f))
}

// Default registers h for kinds that have no handler of their own. A nil h removes
// the default.
func (m *Mux) Default(h Handler) {
	if isNilFunc(h) {
		h = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fallback = h
}

// Handle routes j to its kind's handler.
func (m *Mux) Handle(ctx context.Context, j *Job) error {
	m.mu.RLock()
	h, ok := m.handlers[j.Kind()]
	if !ok {
		h = m.fallback
	}
	m.mu.RUnlock()
	if h == nil {
		return Permanent(fmt.Errorf("%w %q", ErrUnknownKind, j.Kind()))
	}
	return h.Handle(ctx, j)
}

// JSON adapts a function taking a decoded JSON payload to Handler. A payload that is
// not valid JSON for T fails permanently with ErrMalformed (it would never decode on
// a retry either); the dead letter keeps the payload.
func JSON[T any](f func(ctx context.Context, j *Job, v T) error) Handler {
	return HandlerFunc(func(ctx context.Context, j *Job) error {
		var v T
		if err := json.Unmarshal(j.Payload(), &v); err != nil {
			return Permanent(fmt.Errorf("%w: job %s: %w", ErrMalformed, j.ID(), err))
		}
		return f(ctx, j, v)
	})
}
