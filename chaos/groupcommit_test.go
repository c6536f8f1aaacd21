//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// A nats-server that fsyncs every write is SIGKILLed, twice, while two workers commit
// jobs in atomic batches (group commit on, many jobs at once) and a producer enqueues
// in atomic batches. A batch is stored whole or not at all, so after the restarts the
// records and the stream agree: every job ends done, committed once, and nothing is
// left in the stream.
//
// The restarted server has forgotten its latest deliveries and acks (it writes
// consumer state out about ten times a second, fsync or not) and sends those jobs out
// again as first deliveries, to either worker; it also forgets the ids of the jobs it
// no longer holds, so the producer's retry of a batch whose reply was lost stores some
// done jobs again. The job record decides every copy (docs/delivery.md), so these are
// violations, not counts: a run that started after its job's done record was written,
// a job run more times than its record counts attempts (every run is a claim), and two
// runs of a job at once (a claim is taken over only after a whole lease unrenewed,
// and nobody freezes here). The record may count more attempts than runs: a claim that
// landed with its reply lost to a kill is not run.
func TestChaosGroupCommitServerKill(t *testing.T) {
	jobs := 3000
	if os.Getenv("WORKQ_CHAOS") == "full" {
		jobs = 10000
	}
	dir := workDir(t)
	q := "gc"
	srv := newNodes(t, dir, 1)[0]
	srv.start(t)
	nc, js := connect(t, srv.url())
	waitJetStream(t, js, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := producer.New(ctx, js, q, producer.GroupCommit(true))
	if err != nil {
		t.Fatal(err)
	}
	o := observe(t, srv.url(), js, q)

	// The worker's debug log, kept with the servers' stores when the test fails.
	workerLog, err := os.Create(filepath.Join(dir, "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer workerLog.Close()
	var mu sync.Mutex
	runs := map[string][]time.Time{} // job → when each run started
	running := map[string]int{}      // job → runs under way
	var overlaps []string
	handler := consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		mu.Lock()
		runs[j.ID()] = append(runs[j.ID()], time.Now())
		if running[j.ID()]++; running[j.ID()] > 1 {
			overlaps = append(overlaps, j.ID())
		}
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running[j.ID()]--
		mu.Unlock()
		return nil
	})
	wctx, stopWorkers := context.WithCancel(ctx)
	var workers []*consumer.Worker
	werr := make(chan error, 2)
	for i := range 2 {
		_, wjs := connect(t, srv.url())
		w, err := consumer.New(ctx, wjs, q, handler, consumer.GroupCommit(true), consumer.Concurrency(64), consumer.AckWait(2*time.Second),
			consumer.Name(fmt.Sprintf("w%d", i+1)),
			consumer.Logger(slog.New(slog.NewTextHandler(workerLog, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
		go func() { werr <- w.Run(wctx) }()
	}
	committed := func() (n uint64) {
		for _, w := range workers {
			n += w.Stats().Committed
		}
		return n
	}

	// Enqueue in batches of 500 while the worker runs, retrying what was not
	// confirmed (the ids make that safe), through the kills.
	ids := make([]string, jobs)
	for i := range ids {
		ids[i] = jobID("g", i)
	}
	enqueued := make(chan error, 1)
	go func() {
		for start := 0; start < len(ids); start += 500 {
			batch := make([]producer.Job, 0, 500)
			for _, id := range ids[start:min(start+500, len(ids))] {
				batch = append(batch, producer.Job{ID: id, Payload: []byte(id)})
			}
			for {
				if _, err := p.EnqueueBatch(ctx, batch); err == nil {
					break
				} else if ctx.Err() != nil {
					enqueued <- err
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		enqueued <- nil
	}()

	kills := []int{jobs * 3 / 10, jobs * 65 / 100}
	for i, at := range kills {
		waitUntil(t, 90*time.Second, fmt.Sprintf("%d jobs committed", at), func() bool { return int(committed()) >= at })
		srv.crash(t)
		t.Logf("SIGKILL nats-server %d at %d committed", i+1, committed())
		srv.start(t)
		waitJetStream(t, js, 60*time.Second)
	}
	if err := <-enqueued; err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	waitUntil(t, 90*time.Second, "every job done", func() bool { return o.finishedJobs(nc, js) >= jobs })
	waitJobsAcked(t, js, q, 30*time.Second)
	stopWorkers()
	for range workers {
		if err := <-werr; err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	groupCommits := uint64(0)
	for _, w := range workers {
		st := w.Stats()
		t.Logf("%d jobs, worker %s %+v", jobs, w.Name(), st)
		groupCommits += st.GroupCommits
	}
	if groupCommits == 0 {
		t.Fatal("no record write went out in a batch: the test did not exercise group commit")
	}
	o.fillGaps(nc, o.catchUp(js))
	o.mu.Lock()
	defer o.mu.Unlock()
	dones := map[string]int{}
	doneAt := map[string]time.Time{} // the first done write's store time
	for _, r := range o.revs {
		if r.rec.State == "done" {
			if dones[r.key]++; dones[r.key] == 1 {
				doneAt[r.key] = r.at
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range overlaps {
		t.Errorf("VIOLATION (two runs at once): job %s", id)
	}
	overCounted := 0
	for _, id := range ids {
		r, err := p.Status(ctx, id)
		switch {
		case err != nil:
			t.Errorf("VIOLATION (lost job): %s: %v", id, err)
		case r.State != producer.StateDone:
			t.Errorf("VIOLATION: job %s ended %s", id, r.State)
		case dones[id] > 1:
			t.Errorf("VIOLATION (committed twice): job %s has %d done writes", id, dones[id])
		case len(runs[id]) > r.Attempt:
			t.Errorf("VIOLATION (attempt not counted): job %s ran %d times, its record says attempt %d", id, len(runs[id]), r.Attempt)
		case r.Attempt > len(runs[id]):
			overCounted++
		}
		for _, start := range runs[id] {
			if at, ok := doneAt[id]; ok && start.After(at) {
				t.Errorf("VIOLATION (run after its commit): job %s started a run %s after its done record was written", id, start.Sub(at))
			}
		}
	}
	// A claim that landed with its reply lost to a kill counts an attempt that did not
	// run: the next claim follows it.
	t.Logf("%d jobs count more attempts than they ran (claims whose replies a kill lost)", overCounted)
	if left := jobsLeft(t, js, q); left != 0 {
		t.Errorf("VIOLATION: %d jobs left in the stream", left)
	}
}
