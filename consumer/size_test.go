package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A job at the producer's size limit whose handler fails permanently with a huge
// error lands in dead letters after one attempt, whole: its dead letter (and its
// record, whose last_error is bounded) fits the max payload. One byte more is
// refused at enqueue.
func TestJobAtProducerLimitIsDeadLettered(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "atlimit"
	p := newProducer(t, js, q)
	var runs atomic.Int32
	huge := "bad input: " + strings.Repeat("x", 2<<20) // longer than the max payload
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runs.Add(1)
		return consumer.Permanent(errors.New(huge))
	})) // the default AckWait: a short one lets a loaded machine redeliver the big job before its one run, counting a second attempt
	runWorker(t, w)

	ctx := testenv.Context(t, 10*time.Second)
	id := "big-1"
	enqueueLine := len("Workq-Enqueue: ") + 26 + len("\r\n") // the producer's enqueue id
	limit := js.Conn().MaxPayload() - producer.DeadLetterReserve - int64(len("NATS/1.0\r\n\r\n")+len("Nats-Msg-Id: "+id+"\r\n")+enqueueLine)
	if _, err := p.Enqueue(ctx, make([]byte, limit+1), producer.ID("big-2")); !errors.Is(err, producer.ErrPayloadTooLarge) {
		t.Fatalf("enqueue one byte over the producer's limit: %v, want ErrPayloadTooLarge", err)
	}
	payload := bytes.Repeat([]byte("p"), int(limit))
	if _, err := p.Enqueue(ctx, payload, producer.ID(id)); err != nil {
		t.Fatalf("enqueue at the producer's limit (%d bytes): %v", limit, err)
	}
	testenv.Eventually(t, 10*time.Second, "the dead letter", func() bool { return len(deadLetters(t, js, q)) == 1 })
	m := deadLetters(t, js, q)[0]
	if e := m.Header.Get("Workq-Error"); !strings.HasPrefix(e, "permanent: bad input: xxx") || len(e) > 1024 {
		t.Errorf("Workq-Error %.40q… of %d bytes, want the error's first KiB", e, len(e))
	}
	if !bytes.Equal(m.Data, payload) || m.Header.Get("Workq-Payload-Truncated") != "" || m.Header.Get("Workq-Attempts") != "1" {
		t.Errorf("dead letter of %d bytes (want %d), truncated %q, attempts %q", len(m.Data), len(payload),
			m.Header.Get("Workq-Payload-Truncated"), m.Header.Get("Workq-Attempts"))
	}
	r := status(t, p, id)
	if r.State != producer.StateDead || r.Attempt != 1 || !strings.HasPrefix(r.LastError, "permanent: bad input: xxx") || len(r.LastError) > 9<<10 {
		t.Errorf("record %s, attempt %d, last_error of %d bytes", r.State, r.Attempt, len(r.LastError))
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
}

// A job published by another client that takes nearly the whole max payload, and
// fails for good, lands in dead letters with its payload truncated and marked,
// instead of being redelivered forever.
func TestForeignJobNearMaxPayloadIsDeadLettered(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "foreign"
	newProducer(t, js, q) // creates the queue
	var runs atomic.Int32
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runs.Add(1)
		return consumer.Permanent(errors.New("cannot use this"))
	})) // the default AckWait, as above
	runWorker(t, w)

	ctx := testenv.Context(t, 10*time.Second)
	size := int(js.Conn().MaxPayload()) - 16
	payload := bytes.Repeat([]byte("0123456789"), size/10+1)[:size]
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "workq." + q + ".jobs", Data: payload})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the dead letter", func() bool { return len(deadLetters(t, js, q)) == 1 })
	m := deadLetters(t, js, q)[0]
	id := "seq-" + strconv.FormatUint(ack.Sequence, 10)
	if got := m.Header.Get("Workq-Payload-Truncated"); got != strconv.Itoa(size) {
		t.Errorf("Workq-Payload-Truncated = %q, want %d", got, size)
	}
	if len(m.Data) >= size || !bytes.HasPrefix(payload, m.Data) {
		t.Errorf("dead letter payload of %d bytes, want a truncated start of the %d-byte job", len(m.Data), size)
	}
	if m.Header.Get("Workq-Job-Id") != id || m.Header.Get("Workq-Attempts") != "1" ||
		!strings.HasPrefix(m.Header.Get("Workq-Error"), "permanent: cannot") {
		t.Errorf("dead letter headers %v", m.Header)
	}
	testenv.Eventually(t, 5*time.Second, "the original to leave the stream", func() bool { return pendingMessages(t, js, q) == 0 })
	if n := runs.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
}

// A handler that succeeds with a result larger than a job record can hold is not
// retried: the job goes to dead letters after one attempt, saying why.
func TestTooLargeResultIsDeadLettered(t *testing.T) {
	t.Parallel()
	// Today the commit's record write fails and the job is redelivered until its
	// attempts run out. The commit path must check the result first (consumer's
	// checkResult) and fail the run permanently.
	env := testenv.Start(t)
	js := env.JetStream(t)
	const q = "bigresult"
	p := newProducer(t, js, q)
	var runs atomic.Int32
	n := int(js.Conn().MaxPayload())
	w := newWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		runs.Add(1)
		j.SetResult(make([]byte, n))
		return nil
	}), consumer.AckWait(time.Second), consumer.MaxAttempts(3))
	runWorker(t, w)
	if _, err := p.Enqueue(testenv.Context(t, 5*time.Second), []byte("x"), producer.ID("r1")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the dead letter", func() bool { return len(deadLetters(t, js, q)) == 1 })
	want := regexp.MustCompile(`^permanent: result too large \(` + strconv.Itoa(n) + ` bytes, limit (\d+)\)$`)
	e := deadLetters(t, js, q)[0].Header.Get("Workq-Error")
	sub := want.FindStringSubmatch(e)
	if sub == nil {
		t.Fatalf("Workq-Error %q, want %s", e, want)
	}
	if limit, _ := strconv.Atoi(sub[1]); limit < n*7/10 || limit >= n {
		t.Errorf("limit %d for a max payload of %d bytes", limit, n)
	}
	if r := status(t, p, "r1"); r.State != producer.StateDead || r.Attempt != 1 || r.LastError != e || len(r.Result) != 0 {
		t.Errorf("record %s, attempt %d, last_error %q, result of %d bytes", r.State, r.Attempt, r.LastError, len(r.Result))
	}
	if got := runs.Load(); got != 1 {
		t.Errorf("the handler ran %d times, want once", got)
	}
}
