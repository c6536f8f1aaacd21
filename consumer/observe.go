package consumer

import (
	"errors"
	"time"

	"github.com/workq/workq/internal/attempt"
)

// report tells the observer that Run's context carries (internal/attempt; package
// consumertest sets one) what became of j's run, from the worker's own path: after
// the outcome was written to the job record and before a job that will run again is
// put back. Without an observer, the usual case, it does nothing.
func (w *Worker) report(j *Job, o attempt.Outcome, err error, delay time.Duration) {
	if w.observe == nil {
		return
	}
	r := attempt.Report{JobID: j.id, Outcome: o, Attempt: j.attempt, Err: err, Delay: delay}
	if p := (*panicError)(nil); errors.As(err, &p) {
		r.Panicked, r.PanicValue, r.Stack = true, p.value, p.stack
	}
	w.observe(r)
}
