package consumer

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/queue"
)

const testMaxPayload = 1 << 20

// largest is a dead job with every field deadMessage copies at its largest.
func largest(header nats.Header, data []byte) deadJob {
	id := strings.Repeat("i", queue.MaxIDLen)
	q := strings.Repeat("q", 64)
	return deadJob{
		id: id, queue: q, subject: "workq." + q + ".jobs." + id, attempts: math.MinInt64,
		sequence: math.MaxUint64, header: header, data: data,
	}
}

var (
	errLong = errors.New("permanent: " + strings.Repeat("e", 100000) + "\nsecond line")
	deadAt  = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
)

// A job that left DeadLetterReserve free (as a producer makes it) has a dead letter
// that fits untouched, however long its id, queue, error and sequence.
func TestDeadLetterOfAProducersJobFits(t *testing.T) {
	t.Parallel()
	id := strings.Repeat("i", queue.MaxIDLen)
	h := nats.Header{queue.HeaderID: {id}}
	data := make([]byte, testMaxPayload-queue.DeadLetterReserve-queue.HeaderSize(h))
	msg, cut := deadMessage(largest(h, data), "workq.q.dead", errLong, deadAt, testMaxPayload)
	if cut.any() {
		t.Errorf("dead letter of a job at the producer's limit was shrunk: %s", cut)
	}
	if size := queue.MsgSize(msg.Header, msg.Data); size > testMaxPayload {
		t.Errorf("dead letter takes %d bytes, max payload %d", size, testMaxPayload)
	}
	if e := msg.Header.Get(queue.HeaderDeadError); len(e) != queue.MaxDeadError || strings.Contains(e, "second") {
		t.Errorf("Workq-Error of %d bytes, want the first line's first %d", len(e), queue.MaxDeadError)
	}
	if len(msg.Data) != len(data) {
		t.Errorf("payload %d bytes, want %d", len(msg.Data), len(data))
	}
}

// A job that did not leave the reserve free is shrunk to fit, as little as needed:
// the error first, then workq headers known otherwise, then the payload's end (and
// the job's own headers when they alone leave no room). The message id, job id,
// attempts and original sequence always stay.
func TestDeadLetterShrinksToFit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		header  nats.Header
		size    int // payload; with over, how far the whole dead letter is over the max payload
		over    int
		payload bool
		dropped int // workq headers left out
		headers string
	}{
		{name: "error cut only", over: 100},
		{name: "error and one header", over: 1000, dropped: 1},
		{name: "no headers, max payload", size: testMaxPayload, payload: true, dropped: 3},
		{name: "own headers, max payload", header: nats.Header{"X-Trace": {"t1"}, queue.HeaderKind: {"k"}}, size: testMaxPayload, payload: true, dropped: 3},
		{name: "huge own header", header: nats.Header{"X-Big": {strings.Repeat("b", testMaxPayload)}, queue.HeaderKind: {"k"}}, size: 100,
			dropped: 3, headers: "X-Big"},
		{name: "two huge own headers", header: nats.Header{"X-Big": {strings.Repeat("b", testMaxPayload)}, "X-Bigger": {strings.Repeat("b", testMaxPayload+1)}},
			size: 0, dropped: 3, headers: "X-Bigger,X-Big"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := deadJob{id: "seq-12", queue: "q", subject: "workq.q.jobs", attempts: 3, sequence: 12, header: c.header}
			if c.over > 0 {
				whole, _ := deadMessage(d, "workq.q.dead", errLong, deadAt, 0)
				c.size = testMaxPayload - queue.HeaderSize(whole.Header) + c.over
			}
			data := bytes.Repeat([]byte("0123456789"), c.size/10+1)[:c.size]
			d.data = data
			msg, cut := deadMessage(d, "workq.q.dead", errLong, deadAt, testMaxPayload)
			h := msg.Header
			if size := queue.MsgSize(h, msg.Data); size > testMaxPayload {
				t.Fatalf("dead letter takes %d bytes, max payload %d (cut: %s)", size, testMaxPayload, cut)
			}
			for k, v := range map[string]string{queue.HeaderID: "dead:seq-12:12", queue.HeaderDeadID: "seq-12", queue.HeaderDeadAttempts: "3", queue.HeaderDeadSequence: "12"} {
				if h.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, h.Get(k), v)
				}
			}
			if e := h.Get(queue.HeaderDeadError); !strings.HasPrefix(e, "permanent: eeee") || len(e) > queue.MaxDeadError || cut.errorCut == 0 {
				t.Errorf("Workq-Error %.40q… (%d bytes, %d cut)", e, len(e), cut.errorCut)
			}
			if len(cut.dropped) != c.dropped {
				t.Errorf("workq headers left out: %v, want the first %d of %v", cut.dropped, c.dropped, droppable)
			}
			for i, k := range droppable {
				if (h.Get(k) == "") != (i < c.dropped) {
					t.Errorf("%s = %q with %d workq headers left out", k, h.Get(k), c.dropped)
				}
			}
			if got := h.Get(queue.HeaderHeadersDropped); got != c.headers {
				t.Errorf("%s = %q, want %q", queue.HeaderHeadersDropped, got, c.headers)
			}
			for k := range c.header {
				if !strings.Contains(","+c.headers+",", ","+k+",") && h.Get(k) != c.header.Get(k) {
					t.Errorf("the job's header %s was lost", k)
				}
			}
			if !bytes.HasPrefix(data, msg.Data) {
				t.Fatal("the dead letter's payload is not the start of the job's")
			}
			truncated := h.Get(queue.HeaderPayloadTruncated)
			switch {
			case c.payload && (truncated != strconv.Itoa(c.size) || len(msg.Data) >= c.size || cut.payload != c.size):
				t.Errorf("%s = %q, payload %d of %d bytes; want it truncated and marked", queue.HeaderPayloadTruncated, truncated, len(msg.Data), c.size)
			case c.payload && queue.MsgSize(h, msg.Data) != testMaxPayload:
				t.Errorf("truncated to %d bytes in all, want exactly the max payload %d", queue.MsgSize(h, msg.Data), testMaxPayload)
			case !c.payload && (truncated != "" || len(msg.Data) != c.size):
				t.Errorf("payload truncated (%q, %d of %d bytes), want it whole", truncated, len(msg.Data), c.size)
			}
		})
	}
}

// Whatever the payload's size around the max payload, the dead letter fits.
func TestDeadLetterAlwaysFits(t *testing.T) {
	t.Parallel()
	for size := testMaxPayload - 3000; size <= testMaxPayload+10; size += 7 {
		d := deadJob{id: "job", queue: "q", subject: "workq.q.jobs.job", attempts: 1, sequence: 1,
			header: nats.Header{queue.HeaderID: {"job"}}, data: make([]byte, size)}
		msg, _ := deadMessage(d, "workq.q.dead", errLong, deadAt, testMaxPayload)
		if n := queue.MsgSize(msg.Header, msg.Data); n > testMaxPayload {
			t.Fatalf("payload of %d bytes: dead letter of %d bytes, max payload %d", size, n, testMaxPayload)
		}
	}
}
