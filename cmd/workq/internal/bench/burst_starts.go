package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// startLog records when each of a burst's n jobs first started, and what was wrong:
// jobs started twice, before their due time, or carrying another due time.
type startLog struct {
	n int

	mu          sync.Mutex
	due         time.Time            // the jobs' due time; zero: none
	starts      map[string]time.Time // the first start of each job
	first, last time.Time
	stored      time.Time // the latest time a job's message was stored in the stream
	dups, early int
	wrongDue    int
	all         chan struct{} // closed when n jobs have started
}

func newStartLog(n int) startLog {
	return startLog{n: n, starts: make(map[string]time.Time, n), all: make(chan struct{})}
}

// setDue sets the due time the jobs are about to be enqueued with.
func (l *startLog) setDue(due time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.due = due
}

// note records that job id, whose message the stream stored at stored, started at
// now. scheduledAt is the due time the job carries, when the side can tell (known).
func (l *startLog) note(id string, now, stored, scheduledAt time.Time, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.starts[id]; ok {
		l.dups++
		return
	}
	if stored.After(l.stored) {
		l.stored = stored
	}
	if known && !scheduledAt.Equal(l.due) {
		l.wrongDue++
	}
	if now.Before(l.due) {
		l.early++
	}
	if len(l.starts) == 0 {
		l.first = now
	}
	l.starts[id], l.last = now, now
	if len(l.starts) == l.n {
		close(l.all)
	}
}

// wait waits until every job has started (or failed, if not nil, says why it never
// will) and returns the first and last start, and when the last job's message was
// stored.
func (l *startLog) wait(ctx context.Context, failed <-chan error) (first, last, stored time.Time, err error) {
	select {
	case <-l.all:
	case err := <-failed:
		return first, last, stored, err
	case <-ctx.Done():
		l.mu.Lock()
		defer l.mu.Unlock()
		return first, last, stored, fmt.Errorf("%d of %d jobs started: %w", len(l.starts), l.n, ctx.Err())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first, l.last, l.stored, nil
}

// check says what was wrong with the starts.
func (l *startLog) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	if l.dups > 0 {
		errs = append(errs, fmt.Errorf("%d jobs started more than once", l.dups))
	}
	if l.early > 0 {
		errs = append(errs, fmt.Errorf("%d of %d jobs started before their due time %s", l.early, l.n, l.due.Format(time.RFC3339Nano)))
	}
	if l.wrongDue > 0 {
		errs = append(errs, fmt.Errorf("%d of %d jobs carried another due time than %s", l.wrongDue, l.n, l.due.Format(time.RFC3339Nano)))
	}
	return errors.Join(errs...)
}
