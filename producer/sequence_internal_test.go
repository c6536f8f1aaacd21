package producer

import (
	"errors"
	"testing"
	"time"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/workflow"
	"github.com/workq/workq/testenv"
)

// The job before a new one ends between the enqueue's read and its batch: its end
// finds no successor link, so the enqueue, which reads it again after the batch,
// releases the new job itself and drops the link the batch wrote (before, the link
// stayed in the bucket for good). No worker runs here: the end is written as a
// worker writes it.
func TestSequencePredecessorEndsDuringEnqueue(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p, err := New(ctx, js, "seq-race")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Enqueue(ctx, nil, ID("a"), Sequence("k")); err != nil {
		t.Fatal(err)
	}
	p.workflowStep = func(step string, n int) error {
		if step != "sequence-batch" || n != 0 {
			return nil
		}
		// a's end: its done write; what its worker does after it (read a's successor
		// link: none yet; read the tail: b's by then) comes to nothing.
		a, err := p.records.Get(ctx, "a")
		if err != nil {
			return err
		}
		done := *a
		done.State, done.Attempt, done.Message, done.FinishedAt = record.Done, 1, nil, time.Now()
		return p.records.Update(ctx, &done, a.Revision)
	}
	info, err := p.Enqueue(ctx, nil, ID("b"), Sequence("k"))
	if err != nil || !info.Waiting {
		t.Fatalf("b: %+v, %v; want it enqueued waiting for a", info, err)
	}
	b, err := p.records.Get(ctx, "b")
	if err != nil || b.State != record.Queued || b.After != "a" || len(b.WaitingFor) != 0 {
		t.Fatalf("b: %+v, %v; want it released after a", b, err)
	}
	if _, _, err := p.records.GetKey(ctx, workflow.NextKey("k", "a")); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("a's successor link: %v; want it dropped", err)
	}
	if tail, _, err := workflow.ReadLink(ctx, p.records, workflow.TailKey("k")); err != nil || tail == nil || tail.Job != "b" {
		t.Fatalf("the tail: %+v, %v; want b", tail, err)
	}
}

// An enqueue retried after its batch landed (its answer lost, or it failed as it
// told the new job) finds its job id there: the retry finishes what the first left,
// releasing a job left waiting for one that had ended.
func TestSequenceRetriedEnqueueReleasesItsJob(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p, err := New(ctx, js, "seq-retry-enqueue")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"x", "y"} {
		if _, err := p.Enqueue(ctx, nil, ID(id), Sequence("k")); err != nil {
			t.Fatal(err)
		}
	}
	// x ends as if its end had read y's link before y's enqueue wrote it: its done
	// write only.
	x, err := p.records.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	done := *x
	done.State, done.Attempt, done.Message, done.FinishedAt = record.Done, 1, nil, time.Now()
	if err := p.records.Update(ctx, &done, x.Revision); err != nil {
		t.Fatal(err)
	}
	if y, err := p.records.Get(ctx, "y"); err != nil || y.State != record.Waiting {
		t.Fatalf("y: %+v, %v; want it waiting for x", y, err)
	}
	info, err := p.Enqueue(ctx, nil, ID("y"), Sequence("k"))
	if err != nil || !info.Duplicate {
		t.Fatalf("y again: %+v, %v; want a duplicate", info, err)
	}
	if y, err := p.records.Get(ctx, "y"); err != nil || y.State != record.Queued {
		t.Fatalf("y after the retried enqueue: %+v, %v; want it released", y, err)
	}
}

// A sequence's job keeps its message in its record (base64): a payload a plain job may
// have can be too large for that, and is refused before anything is written.
func TestSequenceJobTooLargeForItsRecord(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p, err := New(ctx, js, "seq-large")
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 900<<10)
	if _, err := p.Enqueue(ctx, big); err != nil {
		t.Fatalf("as a plain job: %v", err)
	}
	if _, err := p.Enqueue(ctx, big, ID("big"), Sequence("k")); !errors.Is(err, ErrPayloadTooLarge) {
		t.Fatalf("in a sequence: %v, want ErrPayloadTooLarge", err)
	}
	if _, err := p.records.Get(ctx, "big"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("its record: %v, want none", err)
	}
	if tail, _, err := workflow.ReadLink(ctx, p.records, workflow.TailKey("k")); err != nil || tail != nil {
		t.Fatalf("the tail: %+v, %v; want none", tail, err)
	}
}

// The job before ended and its end released the new job, but the release's publish
// failed (a leader election outlasting the enqueue's context), so the enqueue failed
// before it dropped the successor link. Its retry, a duplicate, finishes that end: the
// message is published and the link dropped (before, the link stayed for good). Found
// by the chaos test.
func TestSequenceRetriedEnqueueDropsTheLink(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	p, err := New(ctx, js, "seq-retry-link")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"x", "y"} {
		if _, err := p.Enqueue(ctx, nil, ID(id), Sequence("k")); err != nil {
			t.Fatal(err)
		}
	}
	// x ended; its end (by the enqueue's tell) wrote y released, and failed to publish.
	for id, state := range map[string]record.State{"x": record.Done, "y": record.Queued} {
		r, err := p.records.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		next := *r
		next.State, next.WaitingFor = state, nil
		if err := p.records.Update(ctx, &next, r.Revision); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := p.records.GetKey(ctx, workflow.NextKey("k", "x")); err != nil {
		t.Fatalf("x's successor link before the retry: %v", err)
	}
	info, err := p.Enqueue(ctx, nil, ID("y"), Sequence("k"))
	if err != nil || !info.Duplicate {
		t.Fatalf("y again: %+v, %v; want a duplicate", info, err)
	}
	if _, _, err := p.records.GetKey(ctx, workflow.NextKey("k", "x")); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("x's successor link after the retry: %v; want it dropped", err)
	}
	if rec, err := p.Status(ctx, "y"); err != nil || rec.State != StateQueued {
		t.Fatalf("y: %+v, %v", rec, err)
	}
	if _, err := p.objects.Stream.GetLastMsgForSubject(ctx, p.names.JobSubject("y")); err != nil {
		t.Fatalf("y's message: %v; want it published", err)
	}
}
