package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// The sequence scenario: what a sequence key costs (producer.Sequence). Both
// comparisons are workq against workq, since raw JetStream has no sequences to
// compare with: jobs spread over many keys drained against the same jobs without
// keys, and the handoff of one hot key (a job's commit → the next one's start)
// against a lone job's enqueue → start.

// KeyedDrain is the drain comparison: Workq is the keyed jobs per second, Raw the
// same number of plain jobs' per second, both from the enqueue's start to the last
// commit.
type KeyedDrain struct {
	Pair
	// Keys is how many keys the jobs were spread over, Enqueuers how many goroutines
	// enqueued them.
	Keys, Enqueuers int
	// SequenceEnqueue and PlainEnqueue are how long the two enqueues took.
	SequenceEnqueue, PlainEnqueue time.Duration
	// Waited is how many of the keyed jobs waited for the one before them, as their
	// records say (After): enqueued while that one had not ended, released by its
	// end. The others found it ended and were published at once.
	Waited int
	// LastStarted and LastDone are when the last keyed job started and committed,
	// from the enqueue's start, as the records say.
	LastStarted, LastDone time.Duration
}

// sequenceEnqueuers is how many goroutines enqueue the drain's keyed jobs, each an
// EnqueueBatch of the jobs of its own keys in per-key order. A batch enqueues
// sequenced jobs one by one (each takes its place in its key's sequence before the
// next is sent), so one batch of them all would time a serial chain of round trips
// against the plain batch's pipeline: goroutines over disjoint keys are the keyed
// jobs' pipeline, and they never contend for a key's tail.
const sequenceEnqueuers = 32

// SequenceDrain times n jobs spread over keys sequence keys (key k holds the jobs
// k·n/keys up to (k+1)·n/keys, enqueued in that order) from the start of their
// enqueue (sequenceEnqueuers goroutines of EnqueueBatch) until the last has
// committed, against n jobs without keys enqueued with one EnqueueBatch until the
// last of them has committed. Each side has a queue of its own and a worker with
// every scenario's settings at the given concurrency and an empty handler, running
// (and warmed by one job) before the enqueue starts (commitTimer).
//
// It then reads the keyed jobs' records and fails unless every one ran once, ended
// done, and started after the job before it in its key committed.
func SequenceDrain(ctx context.Context, env Env, n, keys, concurrency int) (KeyedDrain, error) {
	res := KeyedDrain{Pair: Pair{Scenario: fmt.Sprintf("sequence: %d jobs over %d keys vs plain jobs (workq, c=%d)", n, keys, concurrency), N: n},
		Keys: keys, Enqueuers: min(sequenceEnqueuers, keys)}
	if keys < 1 || keys > n {
		return res, fmt.Errorf("%d jobs over %d keys: want 1 to %d keys", n, keys, n)
	}
	opts := env.workerOpts(consumer.Concurrency(concurrency), consumer.Logger(quiet()))

	t, err := timePlain(ctx, env, "bench-sqp", n, opts)
	if err != nil {
		return res, fmt.Errorf("plain jobs: %w", err)
	}
	res.Raw, res.PlainEnqueue = rate(n, t.took), t.enqueue

	seqs := sequenceJobs("k", n, keys)
	keyed, err := newCommitTimer(ctx, env, "bench-sq", opts)
	if err != nil {
		return res, fmt.Errorf("keyed jobs: %w", err)
	}
	defer keyed.close()
	t, err = keyed.time(ctx, n, func(ctx context.Context, p *producer.Producer) error {
		return enqueueSequences(ctx, p, seqs, res.Enqueuers)
	})
	if err != nil {
		return res, fmt.Errorf("keyed jobs: %w", err)
	}
	res.Workq, res.SequenceEnqueue = rate(n, t.took), t.enqueue
	recs, err := jobRecords(ctx, keyed.p, n+1)
	if err != nil {
		return res, fmt.Errorf("keyed jobs: %w", err)
	}
	if res.Waited, err = checkSequences(recs, seqs); err != nil {
		return res, fmt.Errorf("keyed jobs: %w", err)
	}
	for _, seq := range seqs {
		for _, j := range seq {
			res.LastStarted = max(res.LastStarted, recs[j.ID].StartedAt.Sub(t.start))
			res.LastDone = max(res.LastDone, recs[j.ID].FinishedAt.Sub(t.start))
		}
	}
	return res, keyed.close()
}

// sequenceJobs are n jobs over keys sequence keys, one slice per key in its order:
// key k ("<prefix><k>") holds jobs k·n/keys up to (k+1)·n/keys, job j's id
// "<prefix><k>.<j>".
func sequenceJobs(prefix string, n, keys int) [][]producer.Job {
	seqs := make([][]producer.Job, keys)
	for k := range seqs {
		key := fmt.Sprintf("%s%d", prefix, k)
		for j := k * n / keys; j < (k+1)*n/keys; j++ {
			seqs[k] = append(seqs[k], producer.Job{ID: fmt.Sprintf("%s.%d", key, j), Payload: payload, Sequence: key})
		}
	}
	return seqs
}

// enqueueSequences enqueues seqs with g goroutines, each an EnqueueBatch of the
// sequences k ≡ i (mod g), one after the other, every one in its order.
func enqueueSequences(ctx context.Context, p *producer.Producer, seqs [][]producer.Job, g int) error {
	errs := make([]error, g)
	var wg sync.WaitGroup
	for i := range g {
		var jobs []producer.Job
		for k := i; k < len(seqs); k += g {
			jobs = append(jobs, seqs[k]...)
		}
		wg.Go(func() { _, errs[i] = p.EnqueueBatch(ctx, jobs) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// jobRecords reads the records of the queue's jobs, at most limit, by id: one scan
// of the records bucket (producer.Jobs).
func jobRecords(ctx context.Context, p *producer.Producer, limit int) (map[string]*producer.Record, error) {
	page, err := p.Jobs(ctx, producer.JobQuery{Limit: limit})
	if err != nil {
		return nil, err
	}
	recs := make(map[string]*producer.Record, len(page.Jobs))
	for i := range page.Jobs {
		recs[page.Jobs[i].ID] = &page.Jobs[i].Record
	}
	return recs, nil
}

// checkSequences checks, from their records, that every job of seqs ran once and
// ended done, and that each started after the job before it in its key committed,
// and, when it waited for that job (its record's After), that it was that one. It
// returns how many waited.
func checkSequences(recs map[string]*producer.Record, seqs [][]producer.Job) (waited int, err error) {
	for _, seq := range seqs {
		var prev *producer.Record
		for _, j := range seq {
			r := recs[j.ID]
			switch {
			case r == nil:
				return waited, fmt.Errorf("job %s has no record", j.ID)
			case r.State != producer.StateDone || r.Attempt != 1:
				return waited, fmt.Errorf("job %s ended %s after %d attempts; want done after 1", j.ID, r.State, r.Attempt)
			case r.SequenceKey != j.Sequence:
				return waited, fmt.Errorf("job %s is in sequence %q, not %q", j.ID, r.SequenceKey, j.Sequence)
			case prev == nil && r.After != "":
				return waited, fmt.Errorf("job %s, the first of key %s, waited for %s", j.ID, j.Sequence, r.After)
			case prev == nil:
			case !r.StartedAt.After(prev.FinishedAt):
				return waited, fmt.Errorf("job %s started at %s, before the job before it, %s, committed at %s", j.ID, r.StartedAt, prev.ID, prev.FinishedAt)
			case r.After != "" && r.After != prev.ID:
				return waited, fmt.Errorf("job %s waited for %s, not for the job before it, %s", j.ID, r.After, prev.ID)
			}
			if r.After != "" {
				waited++
			}
			prev = r
		}
	}
	return waited, nil
}

// SequenceHandoff times the handoff of a hot key: n+1 jobs on one key give n samples
// of the time from a job's commit (its record's FinishedAt, stamped by the worker
// just before it writes the record) to the next one's start (StartedAt, stamped as
// its claim is written). The key's first job is held by the handler until all n+1
// are enqueued (one EnqueueBatch, in order), so that every other job waits for the
// one before it and is released by its end: a handoff, never an enqueue. The "raw"
// side is a lone job's enqueue → start, n jobs one at a time as the latency scenario
// enqueues them, on the same queue and worker, run before the key's jobs
// (loneJobs.starts, as WorkflowRelease).
//
// It fails unless every job of the key ran once, ended done, waited for the one
// before it (the first excepted) and started after it committed.
func SequenceHandoff(ctx context.Context, env Env, n int) (Latency, error) {
	res := Latency{Scenario: "sequence handoff vs lone job start (workq)", N: n}
	seqs := sequenceJobs("hot", n+1, 1)
	first, last := seqs[0][0].ID, seqs[0][n].ID
	held := make(chan struct{})
	release := sync.OnceFunc(func() { close(held) })
	defer release()
	lone, err := newLoneJobs(ctx, env, holding(first, held))
	if err != nil {
		return res, err
	}
	defer lone.stop()
	starts, err := lone.starts(ctx, n)
	if err != nil {
		return res, err
	}

	if _, err := lone.p.EnqueueBatch(ctx, seqs[0]); err != nil {
		return res, err
	}
	release()
	if _, err := lone.p.Wait(ctx, last); err != nil {
		return res, err
	}
	recs, err := jobRecords(ctx, lone.p, 2*n+latencyWarm+1)
	if err != nil {
		return res, err
	}
	waited, err := checkSequences(recs, seqs)
	if err != nil {
		return res, fmt.Errorf("key %s: %w", seqs[0][0].Sequence, err)
	}
	if waited != n {
		return res, fmt.Errorf("key %s: %d of the %d jobs after the first waited for the one before them; want all (the first was held until all were enqueued)", seqs[0][0].Sequence, waited, n)
	}
	var handoffs []time.Duration
	for i := 1; i <= n; i++ {
		prev, next := recs[seqs[0][i-1].ID], recs[seqs[0][i].ID]
		handoffs = append(handoffs, next.StartedAt.Sub(prev.FinishedAt))
	}
	res.Workq, res.Raw = percentiles(handoffs), percentiles(starts)
	return res, nil
}

// holding is an empty handler, but for job id, which it holds until held is closed
// (or its run's context ends).
func holding(id string, held <-chan struct{}) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if j.ID() != id {
			return nil
		}
		select {
		case <-held:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}
