package ui

import (
	"context"
	"sync"
	"time"

	"github.com/workq/workq/admin"
)

// snapshot shares one reading of every queue's state among the pages that ask for it
// within half a refresh period, so that many open tabs cost the server one reading
// (about 6 requests per queue) per period, not one each. An action drops it, so that
// the page after it shows what it did.
type snapshot struct {
	mu  sync.Mutex // held while reading: requests that come meanwhile wait for it
	at  time.Time
	qs  []admin.QueueInfo
	ttl time.Duration
}

// queues returns every queue's state, read at most ttl ago, and when it was read.
func (s *snapshot) queues(ctx context.Context, adm *admin.Admin) ([]admin.QueueInfo, time.Time, error) {
	return s.within(ctx, adm, s.ttl)
}

// within returns every queue's state, read less than maxAge ago (the sampler's
// own bound, when its interval is shorter than a page's ttl), and when it was read.
func (s *snapshot) within(ctx context.Context, adm *admin.Admin, maxAge time.Duration) ([]admin.QueueInfo, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && time.Since(s.at) < maxAge {
		return s.qs, s.at, nil
	}
	at := time.Now()
	qs, err := adm.Queues(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	s.at, s.qs = at, qs
	return qs, at, nil
}

// drop forgets the reading.
func (s *snapshot) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at, s.qs = time.Time{}, nil
}
