package consumer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/testenv"
)

// A claim that reached the server but whose reply was lost leaves the run without
// its revision. Its next write (the claim again, or the commit) finds that record:
// it is the run's own, not another worker's, and must not make the run think it was
// reassigned. A record of another run still conflicts.
func TestCreateOverRecognisesOwnLandedClaim(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := testenv.Context(t, 20*time.Second)
	w, err := New(ctx, env.JetStream(t), "own", HandlerFunc(func(context.Context, *Job) error { return nil }),
		Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{id: "job-1"}
	claim := record.Record{ID: "job-1", Queue: "own", State: record.Running, Attempt: 1, Delivery: 1, Sequence: 7,
		Worker: &w.identity, StartedAt: time.Now()}

	landed := claim // the write that landed; its reply never came back
	if err := w.records.Create(ctx, &landed); err != nil {
		t.Fatal(err)
	}
	again := claim
	if err := w.createOver(ctx, j, &again); err != nil {
		t.Fatalf("claim written again over its own landed copy: %v; want it recognised", err)
	}
	if again.Revision != landed.Revision {
		t.Fatalf("claim revision %d, want the landed one %d", again.Revision, landed.Revision)
	}

	done := claim // a lazy first attempt committing without knowing its claim landed
	done.State, done.FinishedAt = record.Done, time.Now()
	if err := w.createOver(ctx, j, &done); err != nil {
		t.Fatalf("commit over its own landed claim: %v", err)
	}
	if got, err := w.records.Get(ctx, "job-1"); err != nil || got.State != record.Done || got.Revision <= landed.Revision {
		t.Fatalf("record after commit: %+v, %v; want done above revision %d", got, err, landed.Revision)
	}

	other := claim // another delivery's run of the same message
	other.Delivery, other.StartedAt = 2, time.Now()
	j2 := &Job{id: "job-2"}
	theirs := other
	theirs.ID = "job-2"
	if err := w.records.Create(ctx, &theirs); err != nil {
		t.Fatal(err)
	}
	mine := claim
	mine.ID = "job-2"
	if err := w.createOver(ctx, j2, &mine); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("claim over another run's claim: %v; want a conflict", err)
	}
}

// A claim (or outcome) written over an earlier record whose reply was lost: the
// retry conflicts with the write that landed, which is the run's own. It is taken as
// written, so the run neither counts a phantom attempt nor takes itself for reassigned.
func TestPutRecognisesOwnLandedUpdate(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := testenv.Context(t, 20*time.Second)
	w, err := New(ctx, env.JetStream(t), "ownupdate", HandlerFunc(func(context.Context, *Job) error { return nil }),
		Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{id: "job-1"}
	failed := record.Record{ID: "job-1", Queue: "ownupdate", State: record.Retrying, Attempt: 1, Delivery: 1, Epoch: 5, Sequence: 3}
	if err := w.records.Create(ctx, &failed); err != nil {
		t.Fatal(err)
	}
	claim := record.Record{ID: "job-1", Queue: "ownupdate", State: record.Running, Attempt: 2, Delivery: 2, Epoch: 5, Sequence: 3,
		Worker: &w.identity, StartedAt: time.Now()}
	landed := claim
	if err := w.records.Update(ctx, &landed, failed.Revision); err != nil {
		t.Fatal(err)
	}
	again := claim
	if err := w.put(ctx, j, &again, failed.Revision); err != nil {
		t.Fatalf("claim written again over its own landed copy: %v; want it recognised", err)
	}
	if again.Revision != landed.Revision {
		t.Fatalf("claim revision %d, want the landed one %d", again.Revision, landed.Revision)
	}
	other := claim // another worker's claim of the same delivery's job
	other.Worker = &record.Worker{Name: "other", Host: "h", PID: 1}
	if err := w.put(ctx, j, &other, failed.Revision); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("another run's claim over the landed one: %v, want a conflict", err)
	}
}

// A write refused while the record has not moved yet (a replicated stream refuses a
// write of a key while another is in flight: this run's own earlier try, after a
// leader change) waits for the record to move: to this run's write, which is
// success; to another run's, which is the conflict; nowhere until the try's time
// is up, which is the conflict too.
func TestSettleConflictWaitsForTheRecordToMove(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := testenv.Context(t, 20*time.Second)
	w, err := New(ctx, env.JetStream(t), "settle", HandlerFunc(func(context.Context, *Job) error { return nil }),
		Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	conflict := record.ErrConflict
	for _, tc := range []struct {
		name    string
		landing func(claim record.Record) *record.Record // what lands after a while; nil: nothing
		want    error
	}{
		{"own write lands", func(c record.Record) *record.Record { c.State = record.Done; return &c }, nil},
		{"another run's write lands", func(c record.Record) *record.Record { c.Delivery = 2; return &c }, conflict},
		{"nothing lands", nil, conflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "job-" + strings.NewReplacer(" ", "-", "'", "").Replace(tc.name)
			claim := record.Record{ID: id, Queue: "settle", State: record.Running, Attempt: 1, Delivery: 1, Sequence: 7,
				Worker: &w.identity, StartedAt: time.Now()}
			if err := w.records.Create(ctx, &claim); err != nil {
				t.Fatal(err)
			}
			next := claim
			next.State = record.Done
			if tc.landing != nil {
				go func() {
					time.Sleep(200 * time.Millisecond)
					l := tc.landing(claim)
					if err := w.records.Update(ctx, l, claim.Revision); err != nil {
						t.Error(err)
					}
				}()
			}
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			err := w.settleConflict(tctx, &Job{id: id}, &next, claim.Revision, conflict)
			if !errors.Is(err, tc.want) || err != nil && tc.want == nil {
				t.Fatalf("settleConflict = %v, want %v", err, tc.want)
			}
			if tc.want == nil && next.Revision <= claim.Revision {
				t.Fatalf("revision %d not the landed write's", next.Revision)
			}
		})
	}
}

// A refused write whose record cannot be read afterwards (here: the try's time is
// up) has an unknown outcome, which is not a conflict: the run is not logged as
// reassigned, and the job is redelivered and settled by what its record says. Fails
// with the unreadable record taken for a conflict.
func TestSettleConflictUnreadIsNotAConflict(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := testenv.Context(t, 20*time.Second)
	w, err := New(ctx, env.JetStream(t), "unread", HandlerFunc(func(context.Context, *Job) error { return nil }),
		Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	next := record.Record{ID: "j", Queue: "unread", State: record.Done, Attempt: 1}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	err = w.settleConflict(ended, &Job{id: "j"}, &next, 3, record.ErrConflict)
	if err == nil || errors.Is(err, record.ErrConflict) {
		t.Fatalf("settleConflict with the record unread = %v; want an error that is not a conflict", err)
	}
}
