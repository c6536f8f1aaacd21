package producer

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

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
