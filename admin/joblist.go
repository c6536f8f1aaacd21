package admin

import (
	"context"

	"github.com/workq/workq/producer"
)

// JobQuery selects the jobs Jobs lists: by state and kind, a page at a time.
type JobQuery = producer.JobQuery

// JobPage is one page of Jobs: its jobs, newest first, and the cursor of the next.
type JobPage = producer.JobPage

// ListedJob is a listed job: its record and when it last changed.
type ListedJob = producer.ListedJob

// Jobs lists the jobs of queue name, newest first, a page at a time, filtered by
// state and kind: to page on, pass the page's Next as the next query's Cursor. It is
// producer.Jobs (which says what it reads), without creating the queue.
func (a *Admin) Jobs(ctx context.Context, name string, q JobQuery) (*JobPage, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.Jobs(ctx, q)
}

// JobCounts counts the jobs of queue name that have a record, by state. It is
// producer.JobCounts (which says what it reads), without creating the queue.
func (a *Admin) JobCounts(ctx context.Context, name string) (map[producer.State]int, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.JobCounts(ctx)
}

// JobTally counts the jobs of queue name that have a record by state, and the failed
// attempts seen. It is producer.JobTally, without creating the queue.
func (a *Admin) JobTally(ctx context.Context, name string) (producer.JobTally, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return producer.JobTally{}, err
	}
	return p.JobTally(ctx)
}
