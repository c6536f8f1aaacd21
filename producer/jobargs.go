package producer

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/workq/workq/internal/option"
)

// JobArgs is a job's payload as a Go type that names its kind, so that producers and
// workers agree on the kind through the type instead of a string typed twice:
//
//	type SendEmail struct{ To string }
//	func (SendEmail) Kind() string { return "send_email" }
//
// EnqueueArgs enqueues a value as JSON under its Kind; consumer.RouteArgs routes that
// kind to a handler that takes the decoded value. consumer.JobArgs is the same
// interface (neither package imports the other), so one type serves both.
type JobArgs interface {
	// Kind names the job's kind. It must return a constant: workers read it from the
	// type's zero value, with no job at hand.
	Kind() string
}

// EnqueueArgs enqueues args as one job: its payload is args encoded as JSON, its kind
// args.Kind(). Options and errors are Enqueue's; a Kind option that names another
// kind than args' is an error, and so is args that JSON cannot encode.
func (p *Producer) EnqueueArgs(ctx context.Context, args JobArgs, opts ...EnqueueOption) (JobInfo, error) {
	j, err := NewJob(args, opts...)
	if err != nil {
		p.metrics.errors.Inc()
		return JobInfo{ID: j.ID}, fmt.Errorf("producer: enqueue on queue %s: %w", p.names.Queue, err)
	}
	return p.Enqueue(ctx, j.Payload, append(slices.Clip(opts), Kind(j.Kind))...)
}

// NewJob returns args as a Job, to enqueue with EnqueueBatch: its payload is args
// encoded as JSON, its kind args.Kind(), and opts set the rest (ID, Header,
// MaxAttempts) as they do for Enqueue. A Kind option that names another kind than
// args' is an error, and so is args that JSON cannot encode.
func NewJob(args JobArgs, opts ...EnqueueOption) (Job, error) {
	var j Job
	for _, o := range opts {
		if o != nil {
			o(&j)
		}
	}
	if args == nil {
		return j, fmt.Errorf("%w: %w", ErrNilArgs, ErrInvalidOption)
	}
	if v := reflect.ValueOf(args); v.Kind() == reflect.Pointer && v.IsNil() {
		return j, fmt.Errorf("%w: %T: %w", ErrNilArgs, args, ErrInvalidOption)
	}
	kind := args.Kind()
	if j.Kind != "" && j.Kind != kind {
		return j, fmt.Errorf("job %s: %T is of kind %q: %w", j.ID, args, kind, option.Invalid("Kind", j.Kind, fmt.Sprintf("%q or no Kind option", kind)))
	}
	payload, err := json.Marshal(args)
	if err != nil {
		return j, fmt.Errorf("job %s: %T as JSON: %w", j.ID, args, err)
	}
	j.Payload, j.Kind = payload, kind
	return j, nil
}

// ScheduleArgs adds or changes the periodic schedule name as Schedule does, firing
// jobs of args: their payload is args encoded as JSON and their kind args.Kind(),
// as EnqueueArgs makes them, so that a schedule's jobs reach the typed handler of
// their kind (consumer.RouteArgs) with no kind set by hand. opts set the rest as
// for Schedule; a Kind option naming another kind is an error.
func (p *Producer) ScheduleArgs(ctx context.Context, name, spec string, args JobArgs, opts ...EnqueueOption) (*ScheduleInfo, error) {
	j, err := NewJob(args, opts...)
	if err != nil {
		return nil, fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue, err)
	}
	return p.Schedule(ctx, name, spec, j.Payload, append(slices.Clip(opts), Kind(j.Kind))...)
}
