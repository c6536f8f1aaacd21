package ui_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// The sequences page lists the keys with jobs not ended: a key halted at a job whose
// predecessor died (linked, with a Resume form that needs the CSRF token) and a key
// whose job runs with one waiting behind it. Resuming from the page runs the halted
// job; a key not halted is refused (400).
func TestSequencesPage(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	const q = "hooks"
	ctx := testenv.Context(t, 60*time.Second)
	p, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		switch j.ID() {
		case "h-1":
			return consumer.Permanent(errors.New("endpoint gone"))
		case "r-1":
			select {
			case <-quit:
			case <-ctx.Done():
			}
		}
		return nil
	}), consumer.Concurrency(4), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	t.Cleanup(func() { close(quit); stop(); <-ran })
	for _, j := range []struct {
		id, key string
		halt    bool
	}{{"h-1", "halts", false}, {"h-2", "halts", true}, {"h-3", "halts", false}, {"r-1", "runs", false}, {"r-2", "runs", false}} {
		opts := []producer.EnqueueOption{producer.ID(j.id), producer.Sequence(j.key)}
		if j.halt {
			opts = append(opts, producer.HaltOnDead())
		}
		if _, err := p.Enqueue(ctx, nil, opts...); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "the key to halt and r-1 to run", func() bool {
		h, err1 := p.Status(ctx, "h-2")
		r, err2 := p.Status(ctx, "r-1")
		return err1 == nil && err2 == nil && h.Halted && r.State == producer.StateRunning
	})
	_, srv := serveJS(t, js)
	c := browser(t)
	// The queue's page counts the jobs waiting in sequences from the links: h-3
	// behind the halted h-2, r-2 behind r-1 (h-2 itself waits for an operator). The
	// halt is written before h-1's link goes.
	a, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "h-1's link to go", func() bool {
		qi, err := a.Queue(ctx, q)
		return err == nil && qi.SequenceWaiting == 2
	})
	_, qpage, _ := get(t, c, srv.URL+"/queues/"+q+"?fragment=1")
	m := regexp.MustCompile(`(?s)data-field="sequences">(.*?)</dd>`).FindStringSubmatch(qpage)
	if m == nil || !strings.Contains(m[1], ">2 waiting in 2 key(s)</a>, the longest ") || !strings.Contains(m[1], `href="/queues/hooks/sequences"`) {
		t.Fatalf("the queue's sequences summary: %q\n%s", m, qpage)
	}
	status, page, _ := get(t, c, srv.URL+"/queues/"+q+"/sequences")
	if status != 200 || !strings.Contains(page, "2 key(s) with jobs not ended, <strong>1 halted</strong>") {
		t.Fatalf("sequences page: %d\n%s", status, page)
	}
	for _, c := range []struct{ key, field, want string }{
		{"halts", "halted", "h-2"}, {"halts", "dead", "h-1"}, {"halts", "waiting", "1"}, {"halts", "active", "-"},
		{"runs", "active", "r-1"}, {"runs", "waiting", "1"}, {"runs", "halted", "-"},
	} {
		if got := cell(page, "sequence", c.key, c.field); got != c.want {
			t.Errorf("key %s, %s: %q, want %q", c.key, c.field, got, c.want)
		}
	}
	if !strings.Contains(page, `href="/queues/hooks/jobs/h-2"`) || strings.Count(page, `action="/queues/hooks/sequences/resume"`) != 1 {
		t.Errorf("the halted job is not linked, or not one Resume form:\n%s", page)
	}
	if status, _, _ := post(t, c, srv.URL+"/queues/"+q+"/sequences/resume", url.Values{"key": {"halts"}}, nil); status != http.StatusForbidden {
		t.Errorf("resume without the CSRF token: %d, want 403", status)
	}
	token := csrfOf(t, page)
	if status, _, _ := post(t, c, srv.URL+"/queues/"+q+"/sequences/resume", url.Values{"key": {"runs"}, "csrf": {token}}, nil); status != http.StatusBadRequest {
		t.Errorf("resume of a key not halted: %d, want 400", status)
	}
	status, _, resp := post(t, c, srv.URL+"/queues/"+q+"/sequences/resume", url.Values{"key": {"halts"}, "csrf": {token}}, nil)
	if loc := resp.Header.Get("Location"); status != http.StatusSeeOther || loc != "/queues/hooks/sequences?done=sequence-resumed&n=1" {
		t.Fatalf("resume: %d to %q", status, loc)
	}
	for _, id := range []string{"h-2", "h-3"} {
		if r, err := p.Wait(ctx, id); err != nil || r.State != producer.StateDone {
			t.Fatalf("%s after the resume: %+v, %v", id, r, err)
		}
	}
	if _, page, _ := get(t, c, srv.URL+"/queues/"+q+"/sequences?done=sequence-resumed&n=1"); !strings.Contains(page, "Sequence resumed") || cell(page, "sequence", "halts", "halted") != "<no row>" {
		t.Errorf("after the resume: want the flash and the key gone:\n%s", page)
	}
}
