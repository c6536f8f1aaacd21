package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/testenv"
)

// The second look of an orphan's takeover: a job whose message is stored after the
// first look (its producer's publish came late) but before the takeover mark is seen
// by the second look, which leaves the key to it and reports a duplicate. Fails with
// the second look removed (the key is taken from a job that is queued).
func TestTakeOrphanSecondLook(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p, err := New(ctx, js, "uso")
	if err != nil {
		t.Fatal(err)
	}
	u, err := p.uniques.Open(ctx, js, p.objects)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Create(ctx, "k", queue.Reservation{Job: "late", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	first, found, err := u.Get(ctx, "k")
	if err != nil || !found {
		t.Fatalf("key: found %v, %v", found, err)
	}
	// The first look found nothing; now the late publish lands.
	msg := &nats.Msg{Subject: p.names.JobSubject("late"), Header: nats.Header{queue.HeaderID: {"late"}, queue.HeaderUnique: {"k"}}}
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	seq, dup, err := p.takeOrphan(ctx, u, "k", first, queue.Reservation{Job: "taker", At: time.Now()})
	if err != nil || !dup || seq != ack.Sequence {
		t.Fatalf("takeOrphan = %d, dup %v, %v; want a duplicate of sequence %d", seq, dup, err, ack.Sequence)
	}
	now, _, err := u.Get(context.Background(), "k")
	if err != nil || now.Job != "late" || now.Takeover != "" {
		t.Fatalf("key after the takeover: %+v, %v; want held by late without a mark", now.Reservation, err)
	}
}

// A unique enqueue whose publish failed keeps its key unless the job was provably
// not stored: a publish that landed though its reply was lost (here: stored, then
// settled with a timeout) may be running, and a second job with the key must be a
// duplicate of it. A refusal by the server frees the key. Fails with the key
// released on every error (a second job with the key is accepted).
func TestUniqueKeptWhenPublishMayHaveLanded(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p, err := New(ctx, js, "ukl")
	if err != nil {
		t.Fatal(err)
	}
	j := Job{ID: "landed", Unique: "k"}
	msg, err := p.message(ctx, &j)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.reserve(ctx, &j)
	if err != nil || r.holder != "" {
		t.Fatalf("reserve = %+v, %v", r, err)
	}
	if _, err := p.publish(ctx, msg); err != nil {
		t.Fatal(err)
	}
	lost := errors.Join(context.DeadlineExceeded, nats.ErrTimeout) // what retry.Do returns when ctx ends on a lost reply
	if holder := p.settleUnique(ctx, r, j.ID, lost); holder != "" {
		t.Fatalf("settleUnique = %q", holder)
	}
	// The same when the last try met no leader, a refusal of that try only.
	noLeader := errors.Join(context.DeadlineExceeded, &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"})
	if notStored(noLeader) {
		t.Fatalf("notStored(%v) = true; an earlier try may have landed", noLeader)
	}
	again, err := p.Enqueue(ctx, nil, Unique("k"))
	if err != nil || !again.Duplicate || again.ID != "landed" {
		t.Fatalf("second enqueue with the key = %+v, %v; want a duplicate of landed", again, err)
	}

	// Refused by the server: nothing stored, the key is freed at once.
	j = Job{ID: "refused", Unique: "k2"}
	if r, err = p.reserve(ctx, &j); err != nil || r.holder != "" {
		t.Fatalf("reserve = %+v, %v", r, err)
	}
	refused := &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum messages exceeded"}
	p.settleUnique(ctx, r, j.ID, fmt.Errorf("publish: %w", refused))
	u, err := p.uniques.Open(ctx, js, p.objects)
	if err != nil {
		t.Fatal(err)
	}
	if e, found, err := u.Get(ctx, "k2"); err != nil || found {
		t.Fatalf("key k2 after a refused publish: %+v, found %v, %v; want free", e, found, err)
	}
}
