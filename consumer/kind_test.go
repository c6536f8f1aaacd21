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

// Any client may set a job's kind. One longer than the record can keep is refused at
// enqueue by the producer and, from a foreign client, dead-lettered without running.
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
	msg := &nats.Msg{Subject: "workq." + q + ".jobs.foreign", Data: []byte("x"), Header: nats.Header{}}
	msg.Header.Set("Workq-Kind", long)
	if _, err := js.PublishMsg(testenv.Context(t, 5*time.Second), msg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the job dead", func() bool { return status(t, p, "foreign").State == producer.StateDead })
	dl := deadLetters(t, js, q)
	if len(dl) != 1 || !strings.Contains(dl[0].Header.Get("Workq-Error"), "kind of 2000 bytes") {
		t.Fatalf("dead letters %v, want one saying the kind is too long", dl)
	}
	select {
	case id := <-ran:
		t.Fatalf("the handler ran %s", id)
	default:
	}
}
