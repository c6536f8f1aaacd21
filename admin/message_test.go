package admin_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// JobMessage finds a waiting job's message at every priority level and delayed, with
// its payload and headers; a finished job's is gone; DeadLetter reads one dead
// letter by sequence.
func TestJobMessageAndDeadLetter(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p, err := producer.New(ctx, js, "msgs")
	if err != nil {
		t.Fatal(err)
	}
	a := adm(t, js)
	enqueue := func(id, payload string, opts ...producer.EnqueueOption) {
		t.Helper()
		if _, err := p.Enqueue(ctx, []byte(payload), append(opts, producer.ID(id), producer.Kind("k-"+id))...); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("plain", "p1")
	enqueue("urgent", "p2", producer.Priority(producer.PriorityUrgent))
	enqueue("later", "p3", producer.After(time.Hour))
	for id, want := range map[string]string{"plain": "p1", "urgent": "p2", "later": "p3"} {
		m, err := a.JobMessage(ctx, "msgs", id)
		if err != nil {
			t.Fatalf("JobMessage(%s): %v", id, err)
		}
		if string(m.Payload) != want || m.Header.Get("Workq-Kind") != "k-"+id || m.Sequence == 0 || m.Time.IsZero() {
			t.Fatalf("JobMessage(%s) = %+v; want payload %q, kind k-%s", id, m, want, id)
		}
	}
	if _, err := a.JobMessage(ctx, "msgs", "nobody"); !errors.Is(err, admin.ErrNotFound) {
		t.Fatalf("JobMessage of an unknown id: %v; want ErrNotFound", err)
	}
	if _, err := a.JobMessage(ctx, "nosuch", "plain"); !errors.Is(err, admin.ErrNoQueue) {
		t.Fatalf("JobMessage on a missing queue: %v; want ErrNoQueue", err)
	}
	if _, err := a.JobMessage(ctx, "msgs", "bad\nid"); err == nil {
		t.Fatal("JobMessage of an invalid id: no error")
	}

	// Run them: plain is done (its message gone), urgent dies.
	w, err := consumer.New(ctx, js, "msgs", consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
		if j.ID() == "urgent" {
			return consumer.Permanent(errors.New("no good"))
		}
		return nil
	}), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { stop(); <-done }()
	testenv.Eventually(t, 10*time.Second, "plain done, urgent dead", func() bool {
		r1, err1 := a.Job(ctx, "msgs", "plain")
		r2, err2 := a.Job(ctx, "msgs", "urgent")
		return err1 == nil && err2 == nil && r1.State == producer.StateDone && r2.State == producer.StateDead
	})
	// The worker writes the record first and then acks (for plain: the ack removes
	// its message from the stream) or publishes the dead letter (for urgent): each
	// comes after the record said so, so wait for it.
	testenv.Eventually(t, 10*time.Second, "JobMessage of a done job: ErrNotFound", func() bool {
		_, err := a.JobMessage(ctx, "msgs", "plain")
		if err != nil && !errors.Is(err, admin.ErrNotFound) {
			t.Fatalf("JobMessage of a done job: %v; want ErrNotFound", err)
		}
		return err != nil
	})
	var dl []admin.DeadLetter
	testenv.Eventually(t, 10*time.Second, "urgent's dead letter", func() bool {
		dl, err = a.DeadLetters(ctx, "msgs", 0, false)
		if err != nil {
			t.Fatalf("DeadLetters: %v", err)
		}
		return len(dl) != 0
	})
	if len(dl) != 1 {
		t.Fatalf("DeadLetters: %v; want urgent's only", dl)
	}
	d, err := a.DeadLetter(ctx, "msgs", dl[0].Sequence)
	if err != nil || d.JobID != "urgent" || string(d.Payload) != "p2" || d.Error == "" || d.Header == nil {
		t.Fatalf("DeadLetter(%d) = %+v, %v", dl[0].Sequence, d, err)
	}
	if after, err := a.DeadLettersAfter(ctx, "msgs", dl[0].Sequence, 0, false); err != nil || len(after) != 0 {
		t.Fatalf("DeadLettersAfter the last one: %v, %v; want none", after, err)
	}
	if after, err := a.DeadLettersAfter(ctx, "msgs", dl[0].Sequence-1, 0, false); err != nil || len(after) != 1 || after[0].Sequence != dl[0].Sequence {
		t.Fatalf("DeadLettersAfter the one before: %v, %v; want it", after, err)
	}
	for _, seq := range []uint64{0, dl[0].Sequence + 1} {
		if _, err := a.DeadLetter(ctx, "msgs", seq); !errors.Is(err, admin.ErrNoDeadLetter) {
			t.Fatalf("DeadLetter(%d): %v; want ErrNoDeadLetter", seq, err)
		}
	}
}
