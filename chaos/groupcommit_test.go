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

// A nats-server that fsyncs every write is SIGKILLed, twice, while a worker commits
// jobs in atomic batches (group commit on, many jobs at once) and a producer enqueues
// in atomic batches. A batch is stored whole or not at all, so after the restarts the
// records and the stream agree: every job ends done, committed once, run as many
// times as its record counts attempts (or once less per kill: a delivery the server
// made as it was killed counts, though it never reached the worker), and nothing is
// left in the stream.
//
// The restarted server has forgotten its latest deliveries and acks (it writes
// consumer state out about ten times a second, fsync or not) and sends those jobs out
// again as first deliveries; the worker knows them as twins of deliveries it holds or
// has just finished (consumer/twins.go), so none runs twice.
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
	runs := map[string]map[uint64]int{} // job → its message's sequence → runs
	_, wjs := connect(t, srv.url())
	w, err := consumer.New(ctx, wjs, q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		mu.Lock()
		if runs[j.ID()] == nil {
			runs[j.ID()] = map[uint64]int{}
		}
		runs[j.ID()][j.Sequence()]++
		mu.Unlock()
		return nil
	}), consumer.GroupCommit(true), consumer.Concurrency(64), consumer.AckWait(2*time.Second),
		consumer.Logger(slog.New(slog.NewTextHandler(workerLog, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()

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
		waitUntil(t, 90*time.Second, fmt.Sprintf("%d jobs committed", at), func() bool { return int(w.Stats().Committed) >= at })
		srv.crash(t)
		t.Logf("SIGKILL nats-server %d at %d committed (%d group commits so far)", i+1, w.Stats().Committed, w.Stats().GroupCommits)
		srv.start(t)
		waitJetStream(t, js, 60*time.Second)
	}
	if err := <-enqueued; err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	waitUntil(t, 90*time.Second, "every job done", func() bool { return o.finishedJobs(nc, js) >= jobs })
	waitJobsAcked(t, js, q, 30*time.Second)
	stopWorker()
	if err := <-werr; err != nil {
		t.Fatalf("worker: %v", err)
	}

	st := w.Stats()
	t.Logf("%d jobs, worker %+v", jobs, st)
	if st.GroupCommits == 0 {
		t.Fatal("no record write went out in a batch: the test did not exercise group commit")
	}
	o.fillGaps(nc, o.catchUp(js))
	o.mu.Lock()
	defer o.mu.Unlock()
	dones := map[string]int{}
	for _, r := range o.revs {
		if r.rec.State == "done" {
			dones[r.key]++
		}
	}
	copies, overCounted := 0, 0
	for _, id := range ids {
		r, err := p.Status(ctx, id)
		switch {
		case err != nil:
			t.Errorf("VIOLATION (lost job): %s: %v", id, err)
		case r.State != producer.StateDone:
			t.Errorf("VIOLATION: job %s ended %s", id, r.State)
		case dones[id] > 1:
			t.Errorf("VIOLATION (committed twice): job %s has %d done writes", id, dones[id])
		case runs[id][r.Sequence] > r.Attempt:
			t.Errorf("VIOLATION (attempt not counted): job %s ran %d times, its record says attempt %d", id, runs[id][r.Sequence], r.Attempt)
		case r.Attempt-runs[id][r.Sequence] > len(kills):
			t.Errorf("VIOLATION (attempts over-counted): job %s ran %d times, its record says attempt %d, with %d server kills", id, runs[id][r.Sequence], r.Attempt, len(kills))
		case r.Attempt > runs[id][r.Sequence]:
			overCounted++
		}
		// A restarted server forgets the ids of jobs already done and removed, so
		// the producer's retry of a batch whose reply was lost stores some again;
		// the worker acks such a copy without committing it (consumer's
		// forgottenDuplicate), though a copy taken on a lazy first claim has run.
		for seq := range runs[id] {
			if seq != r.Sequence {
				copies++
			}
		}
	}
	t.Logf("%d second copies of done jobs (ids the restarted server forgot) ran and were not committed", copies)
	// A record counts every delivery that may have run (producer.Record.Attempt): a
	// delivery the server made as it was killed, which never reached the worker,
	// counts too, so a job can count an attempt more than it ran — one per kill at
	// most. Fewer attempts than runs would be a violation.
	t.Logf("%d jobs count more attempts than they ran (deliveries lost in a kill count as attempts)", overCounted)
	if left := jobsLeft(t, js, q); left != 0 {
		t.Errorf("VIOLATION: %d jobs left in the stream", left)
	}
}
