//go:build chaos

package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/workq/workq/producer"
)

// A Wait and a WaitWorkflow that were watching when the nats-server was SIGKILLed and
// restarted see a record written after the restart at once: they watch anew when the
// connection is back. (Before, they waited for the lost watch to miss two heartbeats:
// 18.9–19.0 s in 4 runs of this test, found by the workflow chaos runs.)
func TestChaosWaitAcrossServerKill(t *testing.T) {
	dir := workDir(t)
	srv := newNodes(t, dir, 1)[0]
	srv.start(t)
	_, js := connect(t, srv.url())
	waitJetStream(t, js, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := producer.New(ctx, js, "probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.EnqueueWorkflow(ctx, producer.NewWorkflow("w").Task("a", producer.Job{})); err != nil {
		t.Fatal(err)
	}
	type res struct {
		what string
		err  error
		at   time.Time
	}
	ch := make(chan res, 2)
	go func() { _, err := p.WaitWorkflow(ctx, "w"); ch <- res{"WaitWorkflow", err, time.Now()} }()
	go func() { _, err := p.Wait(ctx, "w.a"); ch <- res{"Wait", err, time.Now()} }()
	// Both watching: their watches' consumers are on the records stream.
	records, err := js.Stream(ctx, "KV_WORKQ_probe_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	for {
		si, err := records.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if si.State.Consumers >= 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the waits did not start watching")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.crash(t)
	srv.start(t)
	waitJetStream(t, js, 30*time.Second)
	kv, err := js.KeyValue(ctx, "WORKQ_probe_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "w.a")
	if err != nil {
		t.Fatal(err)
	}
	v := []byte(`{"id":"w.a","queue":"probe","state":"done","attempt":1,"workflow":"w","task":"a"}`)
	if _, err := kv.Update(ctx, "w.a", v, e.Revision()); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	for range 2 {
		r := <-ch
		lag := r.at.Sub(written)
		t.Logf("%s returned %s after the done write: %v", r.what, lag.Round(time.Millisecond), r.err)
		// Well under the lost watch's ~19 s; a reconnect takes a second or two.
		if r.err != nil || lag > 10*time.Second {
			t.Errorf("%s across a server restart: returned %s after the write, %v; want the record at once", r.what, lag.Round(time.Millisecond), r.err)
		}
	}
}
