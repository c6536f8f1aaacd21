package consumer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// Schedules and delayed jobs live in the queue's stream: they survive a restart of
// the server (file storage). A delayed job due while the server is down runs once
// after it is back, one due later runs at its time, and the periodic schedule keeps
// firing, each firing once; the firings due while the server was down are made as
// one.
func TestSchedulesSurviveServerRestart(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t) // file storage (in tmpfs): survives Restart
	js := env.JetStream(t)
	p := newProducer(t, js, "restarted")
	st := newStarted()
	runWorker(t, newWorker(t, js, "restarted", st.handler()))
	ctx := testenv.Context(t, 60*time.Second)
	if _, err := p.Schedule(ctx, "tick", "@every 1s", []byte("tick")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "2 firings", func() bool { return len(firings(st)) >= 2 })
	now := time.Now()
	due := map[string]time.Time{"during": now.Add(1500 * time.Millisecond), "after": now.Add(6 * time.Second)}
	for id, at := range due {
		if _, err := p.Enqueue(ctx, []byte(id), producer.ID(id), producer.At(at)); err != nil {
			t.Fatal(err)
		}
	}
	env.Server.Stop()
	time.Sleep(3 * time.Second) // the outage: "during" comes due, the schedule misses firings
	env.Restart(t)
	back := time.Now()
	before := len(firings(st))
	testenv.Eventually(t, 20*time.Second, "both delayed jobs and 3 firings after the restart", func() bool {
		return len(st.runs("during")) > 0 && len(st.runs("after")) > 0 && len(firings(st)) >= before+3
	})
	if err := p.RemoveSchedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	for id, n := range st.ids() {
		if n != 1 {
			t.Errorf("job %s ran %d times", id, n)
		}
	}
	if r := st.runs("during")[0]; r.Before(back) {
		t.Errorf("during ran at %v, before the server was back at %v", r, back)
	}
	if r := st.runs("after")[0]; r.Before(due["after"]) {
		t.Errorf("after ran %v early", due["after"].Sub(r))
	}
	fs := firings(st)
	var gaps []string
	for i := 1; i < len(fs); i++ {
		if d := fs[i].Sub(fs[i-1]); d != time.Second {
			gaps = append(gaps, fmt.Sprint(fs[i-1].Format("15:04:05"), "→", fs[i].Format("15:04:05")))
		}
	}
	t.Logf("during ran %v after the restart; after ran %v after its time; firings %d, gaps %v",
		st.runs("during")[0].Sub(back).Round(time.Millisecond), st.runs("after")[0].Sub(due["after"]).Round(time.Millisecond), len(fs), gaps)
	if len(gaps) > 1 {
		t.Errorf("firings skipped more than once: %v", gaps)
	}
}
