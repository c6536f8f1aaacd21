package consumer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Any client may set a job's kind and enqueue id. One longer than the record can keep
// is refused at enqueue by the producer and, from a foreign client, dead-lettered
// without running — also under an id whose earlier job is done (the dead record
// replaces the done one; it used to conflict with it, and the job came back for ever),
// and with the attempt it claimed not counted.
func TestOverlongKindIsDeadLettered(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "longkind"
	p := newProducer(t, js, q)
	long := strings.Repeat("k", 2000)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.Kind(long)); !errors.Is(err, producer.ErrInvalidName) {
		t.Fatalf("Enqueue with a kind of 2000 bytes: %v, want ErrInvalidName", err)
	}
	ran := make(chan string, 2)
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		ran <- j.ID()
		return nil
	}))
	runWorker(t, w)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("reused")); err != nil {
		t.Fatal(err)
	}
	if id := <-ran; id != "reused" {
		t.Fatalf("ran %s", id)
	}
	testenv.Eventually(t, 10*time.Second, "the first job done", func() bool { return status(t, p, "reused").State == producer.StateDone })
	for _, c := range []struct{ id, header, value, reason string }{
		{"foreign", "Workq-Kind", long, "kind of 2000 bytes"},
		{"reused", "Workq-Kind", long, "kind of 2000 bytes"},
		{"enqueue", "Workq-Enqueue", strings.Repeat("e", 200), "Workq-Enqueue of 200 bytes"},
	} {
		msg := &nats.Msg{Subject: "workq." + q + ".jobs." + c.id, Data: []byte("x"), Header: nats.Header{}}
		msg.Header.Set(c.header, c.value)
		if _, err := js.PublishMsg(testenv.Context(t, 5*time.Second), msg); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, c.id+" dead", func() bool { return status(t, p, c.id).State == producer.StateDead })
		if r := status(t, p, c.id); r.Attempt != 0 || !strings.Contains(r.LastError, c.reason) {
			t.Errorf("%s: record %+v, want dead at attempt 0 saying %q", c.id, r, c.reason)
		}
	}
	dl := deadLetters(t, js, q)
	if len(dl) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dl))
	}
	for _, m := range dl {
		if e := m.Header.Get("Workq-Error"); !strings.Contains(e, "of 2000 bytes") && !strings.Contains(e, "of 200 bytes") {
			t.Errorf("dead letter says %q", e)
		}
	}
	select {
	case id := <-ran:
		t.Fatalf("the handler ran %s", id)
	default:
	}
}
