package consumer_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// The job records bucket is public: any client with write access can put anything at
// a job's key. These tests put hostile values there before a job is delivered and
// while it runs, and check that the worker never panics, never commits a job whose
// record it cannot read as that job's record, that every job still ends (committed or
// dead-lettered, no endless redelivery), and that the event is logged with the job,
// the queue and what was wrong.

// textLog keeps a worker's log as text lines (attributes included) for assertions.
type textLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *textLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *textLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// line returns the first logged line holding every one of parts, "" if none.
func (l *textLog) line(parts ...string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
next:
	for _, ln := range strings.Split(l.buf.String(), "\n") {
		for _, p := range parts {
			if !strings.Contains(ln, p) {
				continue next
			}
		}
		return ln
	}
	return ""
}

// waitLine waits for a logged line holding every one of parts and returns it.
func (l *textLog) waitLine(t *testing.T, d time.Duration, parts ...string) string {
	t.Helper()
	var ln string
	testenv.Eventually(t, d, fmt.Sprintf("a log line with %q", parts), func() bool {
		ln = l.line(parts...)
		return ln != ""
	})
	return ln
}

// foreignPut writes value at job id's key of queue q's records bucket, as another
// client would, and returns its revision.
func foreignPut(t *testing.T, js jetstream.JetStream, q, id string, value []byte) uint64 {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Errorf("records bucket of %s: %v", q, err) // not Fatal: handlers call it
		return 0
	}
	rev, err := kv.Put(ctx, id, value)
	if err != nil {
		t.Errorf("foreign put at %s: %v", id, err)
	}
	return rev
}

// enqueueJob enqueues job id with a small payload to p's queue and returns its stream
// sequence.
func enqueueJob(t *testing.T, p *producer.Producer, id string) uint64 {
	t.Helper()
	info, err := p.Enqueue(testenv.Context(t, 10*time.Second), []byte("payload"), producer.ID(id))
	if err != nil {
		t.Fatal(err)
	}
	return info.Sequence
}

// hostileValue is a value another client puts at a job's key; value gets the job's id
// and stream sequence, and the server's max payload.
type hostileValue struct {
	name   string
	value  func(id string, seq uint64, maxPayload int64) []byte
	reason string // what the worker's log and the dead letter say is wrong
	// ackWait is the worker's AckWait with this value at the key; 0: a second. A
	// claim's reads are bounded by AckWait, so it must cover reading the value.
	ackWait time.Duration
}

// lease is the AckWait of a worker meeting hv.
func (hv hostileValue) lease() consumer.Option {
	return consumer.AckWait(cmp.Or(hv.ackWait, time.Second))
}

// notRecords are values that are not the job's record: each must end the job in dead
// letters, never committed.
var notRecords = []hostileValue{
	{"garbage", func(string, uint64, int64) []byte { return []byte("\x00\xff\xfe not json {{{") },
		"do not decode as a job record", 0},
	// Reading and decoding a value this large took 270 ms under the race detector
	// with two other processes busy (the decode 200 ms of it), and more than the
	// claim's bound of a second on a loaded CI machine, where the job's claims then
	// timed out again and again, backing off, past the test's wait: its worker gets
	// five seconds.
	{"huge-json", func(_ string, _ uint64, max int64) []byte {
		return fmt.Appendf(nil, `{"junk":%q}`, strings.Repeat("x", int(max)-4096))
	}, `the record of job ""`, 5 * time.Second},
	// Another job's record, done, with this job's stream sequence: taken as this
	// job's state it would ack the job as committed without running it.
	{"other-job", func(_ string, seq uint64, _ int64) []byte {
		return fmt.Appendf(nil, `{"id":"someone-else","queue":"elsewhere","state":"done","attempt":1,"sequence":%d,"result":"c3RvbGVu"}`, seq)
	}, `the record of job "someone-else"`, 0},
	{"unknown-state", func(id string, seq uint64, _ int64) []byte {
		return fmt.Appendf(nil, `{"id":%q,"state":"exploded","attempt":1,"sequence":%d}`, id, seq)
	}, `unknown state "exploded"`, 0},
	{"negative-attempt", func(id string, seq uint64, _ int64) []byte {
		return fmt.Appendf(nil, `{"id":%q,"state":"done","attempt":-5,"sequence":%d}`, id, seq)
	}, "negative attempt -5", 0},
	{"wrong-types", func(id string, _ uint64, _ int64) []byte {
		return fmt.Appendf(nil, `{"id":%q,"state":"running","attempt":"two","worker":[1,2],"sequence":-1}`, id)
	}, "do not decode as a job record", 0},
}

// foreignWorker starts a worker on q with a short AckWait, h, and its log kept in lg.
func foreignWorker(t *testing.T, js jetstream.JetStream, q string, h consumer.Handler, lg *textLog, opts ...consumer.Option) *consumer.Worker {
	t.Helper()
	w := newWorker(t, js, q, h, append([]consumer.Option{consumer.AckWait(time.Second), consumer.Logger(lg.logger())}, opts...)...)
	runWorker(t, w)
	return w
}

// wantDeadNotCommitted waits for job id of queue q to end in dead letters, its record
// readable again and dead, its dead letter saying why, and checks nothing committed.
func wantDeadNotCommitted(t *testing.T, js jetstream.JetStream, p *producer.Producer, w *consumer.Worker, q, id, reason string) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, id+" dead", func() bool {
		r, err := p.Status(testenv.Context(t, 5*time.Second), id)
		return err == nil && r.State == producer.StateDead
	})
	r := status(t, p, id)
	if r.ID != id || !strings.Contains(r.LastError, "not a record of this job") || !strings.Contains(r.LastError, reason) || len(r.Result) != 0 {
		t.Errorf("%s: dead record %+v; want it to say the value was not its record (%s)", id, r, reason)
	}
	m := qaDeadLetter(t, js, q)
	if m.Header.Get("Workq-Job-Id") != id || !strings.Contains(m.Header.Get("Workq-Error"), "not a record of this job") {
		t.Errorf("%s: dead letter headers %v", id, m.Header)
	}
	testenv.Eventually(t, 10*time.Second, "the jobs stream of "+q+" empty", func() bool { return qaStreamMsgs(t, js, "WORKQ_"+q) == 0 })
	if s := w.Stats(); s.Committed != 0 {
		t.Errorf("%s: %d commits; a job whose record is not its own must not commit", id, s.Committed)
	}
}

// A hostile value at the key before the job is delivered: the job is dead-lettered,
// never committed, and the worker logs the job, the queue and what was wrong.
func TestForeignValueBeforeDeliveryDeadLettersTheJob(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	for _, hv := range notRecords {
		t.Run(hv.name, func(t *testing.T) {
			t.Parallel()
			q, id := "fb-"+hv.name, "job-"+hv.name
			p := newProducer(t, js, q)
			seq := enqueueJob(t, p, id)
			foreignPut(t, js, q, id, hv.value(id, seq, js.Conn().MaxPayload()))
			var runs atomic.Int32
			lg := &textLog{}
			w := foreignWorker(t, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error {
				runs.Add(1)
				return nil
			}), lg, hv.lease())
			wantDeadNotCommitted(t, js, p, w, q, id, hv.reason)
			ln := lg.waitLine(t, 5*time.Second, "job "+id+": the value at its key is not its record", "queue="+q, "job="+id, strings.ReplaceAll(hv.reason, `"`, `\"`)) // slog's text quotes the error
			t.Logf("logged: %s", ln)
			// Every run claims before it starts, and the claim meets the value: the
			// handler never runs.
			if n := runs.Load(); n != 0 {
				t.Errorf("handler ran %d times, want none", n)
			}
		})
	}
}

// A hostile value written over the claim while the job runs, just before it
// commits: the commit's compare-and-set is refused and logged as a reassignment,
// and the job still ends (in dead letters: its next delivery finds the value).
func TestForeignValueDuringRunFencesTheCommit(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	for _, hv := range notRecords {
		t.Run(hv.name, func(t *testing.T) {
			t.Parallel()
			q, id := "fr-"+hv.name, "job-"+hv.name
			p := newProducer(t, js, q)
			seq := enqueueJob(t, p, id)
			var runs atomic.Int32
			lg := &textLog{}
			w := foreignWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
				if runs.Add(1) > 1 {
					return nil
				}
				if _, err := j.FencingToken(ctx); err != nil { // the claim is written
					return err
				}
				foreignPut(t, js, q, id, hv.value(id, seq, js.Conn().MaxPayload()))
				return nil // commits at once: before any heartbeat can see the value
			}), lg, hv.lease())
			lg.waitLine(t, 10*time.Second, "job "+id+" was reassigned", "queue="+q, "job="+id, "commit refused")
			wantDeadNotCommitted(t, js, p, w, q, id, hv.reason)
			t.Logf("logged: %s", lg.line("job "+id+": the value at its key is not its record"))
			if n := runs.Load(); n != 1 {
				t.Errorf("handler ran %d times, want once", n)
			}
		})
	}
}

// A hostile value written over the claim of a long run is seen by the run's claim
// check (beside a heartbeat): the handler's context ends with ErrStale, nothing is
// committed, and the job ends in dead letters.
func TestForeignValueDuringLongRunCancelsIt(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	q, id := "flong", "long-1"
	p := newProducer(t, js, q)
	enqueueJob(t, p, id)
	cause := make(chan error, 1)
	lg := &textLog{}
	w := foreignWorker(t, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if j.Attempt() > 1 {
			return nil
		}
		if _, err := j.FencingToken(ctx); err != nil {
			return err
		}
		foreignPut(t, js, q, id, []byte("garbage over a running claim"))
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
			return ctx.Err()
		case <-time.After(10 * time.Second):
			cause <- nil
			return nil
		}
	}), lg)
	if err := <-cause; !errors.Is(err, consumer.ErrStale) || !errors.Is(err, consumer.ErrCorruptRecord) {
		t.Errorf("handler's context ended with %v; want ErrStale wrapping ErrCorruptRecord", err)
	}
	lg.waitLine(t, 10*time.Second, "job "+id+" was reassigned", "queue="+q)
	wantDeadNotCommitted(t, js, p, w, q, id, "do not decode as a job record")
}

// A valid record of the job that is huge (a last error of all but 64 bytes of the
// server's max payload, as another client may write): the worker claims it, cutting the error it
// carries over, runs and commits the job. Copied whole, the claim could never be
// written and the job would be redelivered for ever.
func TestForeignHugeRecordOfTheJobStillCommits(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	q, id := "fhuge", "huge-1"
	p := newProducer(t, js, q)
	seq := enqueueJob(t, p, id)
	// The value takes all but 64 bytes of the max payload: the claim, which adds the
	// worker, its times and the delivery, would not fit with the error in it.
	doc := func(lastError string) []byte {
		return fmt.Appendf(nil, `{"id":%q,"queue":%q,"state":"retrying","attempt":1,"sequence":%d,"last_error":%q}`, id, q, seq, lastError)
	}
	huge := strings.Repeat("e", int(js.Conn().MaxPayload())-64-len(doc("")))
	foreignPut(t, js, q, id, doc(huge))
	lg := &textLog{}
	w := foreignWorker(t, js, q, consumer.HandlerFunc(func(context.Context, *consumer.Job) error { return nil }), lg)
	testenv.Eventually(t, 20*time.Second, id+" done", func() bool {
		r, err := p.Status(testenv.Context(t, 5*time.Second), id)
		return err == nil && r.State == producer.StateDone
	})
	r := status(t, p, id)
	if len(r.LastError) >= len(huge) || !strings.Contains(r.LastError, "bytes cut]") {
		t.Errorf("committed record's last error is %d bytes; want it cut", len(r.LastError))
	}
	testenv.Eventually(t, 5*time.Second, "one commit counted", func() bool { return w.Stats().Committed == 1 })
}

// Status (and admin's Job, which `workq job status` calls) says a value at the key
// that is not the job's record is ErrCorruptRecord, naming the job, the revision and
// what is wrong, rather than panic or report it as the job's state.
func TestForeignValueStatusSaysCorrupt(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 30*time.Second)
	q := "fstatus"
	p := newProducer(t, js, q)
	a, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	for _, hv := range notRecords {
		id := "st-" + hv.name
		info, err := p.Enqueue(ctx, []byte("payload"), producer.ID(id))
		if err != nil {
			t.Fatal(err)
		}
		rev := foreignPut(t, js, q, id, hv.value(id, info.Sequence, js.Conn().MaxPayload()))
		want := fmt.Sprintf("job record %s at revision %d", id, rev)
		r, err := p.Status(ctx, id)
		if r != nil || !errors.Is(err, producer.ErrCorruptRecord) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), hv.reason) {
			t.Errorf("%s: Status = %+v, %v; want ErrCorruptRecord saying %q and %q", hv.name, r, err, want, hv.reason)
		}
		r, err = a.Job(ctx, q, id)
		if r != nil || !errors.Is(err, admin.ErrCorruptRecord) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: admin Job = %+v, %v; want ErrCorruptRecord saying %q", hv.name, r, err, want)
		}
		if r, err := p.Cancel(ctx, id); r != nil || !errors.Is(err, producer.ErrCorruptRecord) {
			t.Errorf("%s: Cancel = %+v, %v; want ErrCorruptRecord", hv.name, r, err)
		}
	}
}

// A record of the job that another client wrote claiming it running, which no run
// renews: the job does not wait for it for ever. A delivery finds the claim and
// watches it; once the record has stood unchanged for the claim's lease (its
// lease_ms, or the worker's AckWait for a record without one) on the worker's clock,
// the worker takes the job over, runs it and commits it as attempt 2.
func TestForeignClaimNeverRenewedIsTakenOver(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	for _, c := range []struct{ name, claim string }{
		{"lease", `{"id":%q,"state":"running","attempt":1,"max_attempts":5,"run":"intruder-1","lease_ms":1500,"sequence":%d,"worker":{"name":"intruder"}}`},
		{"no lease", `{"id":%q,"state":"running","attempt":1,"max_attempts":5,"sequence":%d,"worker":{"name":"intruder"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q, id := "fa-"+strings.ReplaceAll(c.name, " ", "-"), "job-ahead"
			p := newProducer(t, js, q)
			seq := enqueueJob(t, p, id)
			foreignPut(t, js, q, id, fmt.Appendf(nil, c.claim, id, seq))
			lg := &textLog{}
			w := foreignWorker(t, js, q, consumer.HandlerFunc(func(_ context.Context, j *consumer.Job) error {
				j.SetResult([]byte("ran"))
				return nil
			}), lg)
			testenv.Eventually(t, 20*time.Second, id+" done", func() bool {
				r, err := p.Status(testenv.Context(t, 5*time.Second), id)
				return err == nil && r.State == producer.StateDone
			})
			if r := status(t, p, id); string(r.Result) != "ran" || r.Worker.Name == "" || r.Worker.Name == "intruder" || r.Attempt != 2 {
				t.Errorf("record %+v: want the job run and committed by the worker as attempt 2", r)
			}
			// The worker counts a commit after its record's write, which the test saw.
			testenv.Eventually(t, 5*time.Second, "the commit counted", func() bool { return w.Stats().Committed == 1 })
			if s := w.Stats(); s.Committed != 1 || s.Watched == 0 {
				t.Errorf("stats %+v: want the claim watched, then one commit", s)
			}
			lg.waitLine(t, 5*time.Second, "job "+id+": the claim of run", "taking the job over", "queue="+q)
		})
	}
}
