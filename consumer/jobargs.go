package consumer

import (
	"context"
	"fmt"

	"github.com/workq/workq/internal/jobargs"
	"github.com/workq/workq/internal/option"
)

// JobArgs is a job's payload as a Go type that names its kind, so that producers and
// workers agree on the kind through the type instead of a string typed twice:
//
//	type SendEmail struct{ To string }
//	func (SendEmail) Kind() string { return "send_email" }
//
// producer.EnqueueArgs enqueues a value as JSON under its Kind; RouteArgs routes that
// kind to a handler that takes the decoded value. producer.JobArgs is the same
// interface (this package does not import producer), so one type serves both.
type JobArgs interface {
	// Kind names the job's kind. It must return a constant: a worker reads it from
	// the type's zero value (a new zero value for a pointer type), with no job at hand.
	Kind() string
}

// RouteArgs registers f on m for T's kind: jobs of that kind are decoded from JSON
// into a T and passed to f. As with JSON, a payload that is not valid JSON for T
// fails permanently with ErrMalformed (it would never decode on a retry either) and
// its dead letter keeps the payload. A later route for the same kind replaces this
// one; a nil f removes the kind's route.
//
// It fails, registering nothing, when T's kind cannot be read from the type: T is
// an interface type, its Kind panics on a zero value, or the kind is longer than
// producers allow. Registering by type is the point: a kind spelled differently at
// the producer and the worker is a compile error (two types), not a dead letter.
func RouteArgs[T JobArgs](m *Mux, f func(ctx context.Context, j *Job, args T) error) error {
	kind, err := jobargs.KindOf[T]()
	if err != nil {
		return fmt.Errorf("consumer: route: %w", err)
	}
	if m == nil {
		return fmt.Errorf("consumer: route kind %q: %w", kind, option.Nil("Mux"))
	}
	if f == nil {
		m.Route(kind, nil)
		return nil
	}
	m.Route(kind, JSON(f))
	return nil
}
