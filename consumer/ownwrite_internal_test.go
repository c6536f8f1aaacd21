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
// its revision. Its next try (the claim again, or the commit) finds that record: it
// is the run's own, not another run's — the record names the run — and must not make
// the run think it was reassigned. A record of another run still conflicts. Fails
// with resolveConflict's Landed check removed.
func TestCASRecognisesOwnLandedWrite(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := testenv.Context(t, 20*time.Second)
	w, err := New(ctx, env.JetStream(t), "own", HandlerFunc(func(context.Context, *Job) error { return nil }),
		Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	claim := record.Record{ID: "job-1", Queue: "own", State: record.Running, Attempt: 1, Run: "run-a", Sequence: 7,
		Worker: &w.identity, StartedAt: time.Now()}

	landed := claim // the create that landed; its reply never came back
	if err := w.records.Create(ctx, &landed); err != nil {
		t.Fatal(err)
	}
	again := claim
	if err := w.cas(ctx, &again, 0); err != nil {
		t.Fatalf("claim written again over its own landed copy: %v; want it recognised", err)
	}
	if again.Revision != landed.Revision {
		t.Fatalf("claim revision %d, want the landed one %d", again.Revision, landed.Revision)
	}

	done := claim // the commit over the claim, landed with its reply lost
	done.State, done.FinishedAt = record.Done, time.Now()
	landedDone := done
	if err := w.records.Update(ctx, &landedDone, landed.Revision); err != nil {
		t.Fatal(err)
	}
	if err := w.cas(ctx, &done, landed.Revision); err != nil || done.Revision != landedDone.Revision {
		t.Fatalf("commit sent again over its own landed commit: %v (revision %d, want %d)", err, done.Revision, landedDone.Revision)
	}

	theirs := claim // another run's claim of the same job
	theirs.ID, theirs.Run = "job-2", "run-b"
	if err := w.records.Create(ctx, &theirs); err != nil {
		t.Fatal(err)
	}
	mine := claim
	mine.ID = "job-2"
	if err := w.cas(ctx, &mine, 0); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("claim over another run's claim: %v; want a conflict", err)
	}
	stale := claim // and a commit over a claim another run took over
	stale.ID, stale.State = "job-2", record.Done
	if err := w.cas(ctx, &stale, theirs.Revision-1); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("commit over another run's claim: %v; want a conflict", err)
	}
}

// A write refused while the record has not moved yet (a replicated stream refuses a
// write of a key while another is in flight: this run's own earlier try, after a
// leader change) waits for the record to move: to this run's write, which is
// success; to another run's, which is the conflict; nowhere until the try's time is
// up, which leaves the outcome unknown — not a conflict: the write may still land.
func TestResolveConflictWaitsForTheRecordToMove(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := testenv.Context(t, 20*time.Second)
	w, err := New(ctx, env.JetStream(t), "settle", HandlerFunc(func(context.Context, *Job) error { return nil }),
		Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	conflict := record.ErrConflict
	unknown := context.DeadlineExceeded
	for _, tc := range []struct {
		name    string
		landing func(claim record.Record) *record.Record // what lands after a while; nil: nothing
		want    error
	}{
		{"own write lands", func(c record.Record) *record.Record { c.State = record.Done; return &c }, nil},
		{"another run's write lands", func(c record.Record) *record.Record { c.Run = "run-b"; return &c }, conflict},
		{"nothing lands", nil, unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "job-" + strings.NewReplacer(" ", "-", "'", "").Replace(tc.name)
			claim := record.Record{ID: id, Queue: "settle", State: record.Running, Attempt: 1, Run: "run-a", Sequence: 7,
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
			err := w.resolveConflict(tctx, &next, claim.Revision, conflict)
			if !errors.Is(err, tc.want) || err != nil && tc.want == nil || tc.want == unknown && errors.Is(err, conflict) {
				t.Fatalf("resolveConflict = %v, want %v", err, tc.want)
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
func TestResolveConflictUnreadIsNotAConflict(t *testing.T) {
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
	err = w.resolveConflict(ended, &next, 3, record.ErrConflict)
	if err == nil || errors.Is(err, record.ErrConflict) {
		t.Fatalf("resolveConflict with the record unread = %v; want an error that is not a conflict", err)
	}
}
