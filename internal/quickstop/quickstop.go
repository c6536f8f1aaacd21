// Package quickstop tells a worker, through the context given to consumer.Worker.Run,
// that it may end its open pulls at once when it stops.
//
// A stopping worker normally lets its open pull expire (within a second) and hands
// back whatever arrives on it, so that a job the server sends in that second goes to
// another worker at once. Ending the pull instead drops a message already on its way,
// which then waits out its AckWait before it is redelivered. Package consumertest
// stops a worker whose server is discarded with the test, where nothing can wait:
// there the second is only a slow test.
package quickstop

import "context"

type key struct{}

// With returns ctx telling the worker it is given to that it may stop its pulls at once.
func With(ctx context.Context) context.Context { return context.WithValue(ctx, key{}, true) }

// Of reports whether ctx says so.
func Of(ctx context.Context) bool {
	v, _ := ctx.Value(key{}).(bool)
	return v
}
