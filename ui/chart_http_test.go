package ui_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
	"github.com/workq/workq/ui"
)

// chartPoint is a point of a chart's series as the page carries it.
type chartPoint struct {
	At time.Time
	V  float64
}

var (
	chartFigure = regexp.MustCompile(`(?s)data-chart="([a-z]+)"(.*?)</(?:figure|svg)>`)
	chartLine   = regexp.MustCompile(`data-series="([a-z]+)" data-points="([^"]*)"`)
)

// chartsOf reads the charts of a page (or of a part of it): chart, series, points.
func chartsOf(t *testing.T, page string) map[string]map[string][]chartPoint {
	t.Helper()
	out := map[string]map[string][]chartPoint{}
	for _, fig := range chartFigure.FindAllStringSubmatch(page, -1) {
		lines := map[string][]chartPoint{}
		for _, l := range chartLine.FindAllStringSubmatch(fig[2], -1) {
			lines[l[1]] = parsePoints(t, l[2])
		}
		out[fig[1]] = lines
	}
	return out
}

// parsePoints parses a data-points attribute: "unixms:value …".
func parsePoints(t *testing.T, s string) []chartPoint {
	t.Helper()
	var ps []chartPoint
	for _, f := range strings.Fields(s) {
		ms, v, ok := strings.Cut(f, ":")
		at, err1 := strconv.ParseInt(ms, 10, 64)
		val, err2 := strconv.ParseFloat(v, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("bad data point %q in %q", f, s)
		}
		ps = append(ps, chartPoint{time.UnixMilli(at), val})
	}
	return ps
}

// runSlowWorker runs a worker of queue until the test ends: each job takes took,
// concurrency of them at once, none pulled ahead (so that the waiting depth is the
// backlog).
func runSlowWorker(t *testing.T, js jetstream.JetStream, queue string, took time.Duration, concurrency int) {
	t.Helper()
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		select {
		case <-time.After(took):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	runWorker(t, js, queue, h, consumer.Concurrency(concurrency), consumer.Prefetch(0))
}

// runWorker runs a worker of queue with handler h until the test ends.
func runWorker(t *testing.T, js jetstream.JetStream, queue string, h consumer.Handler, opts ...consumer.Option) {
	t.Helper()
	w, err := consumer.New(testenv.Context(t, 10*time.Second), js, queue, h,
		append([]consumer.Option{consumer.Logger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
}

// integral is the sum of a rate's points times the time each stands for (since
// the point before): how many jobs the rate counts in all.
func integral(ps []chartPoint, from time.Time) float64 {
	sum := 0.0
	for i, p := range ps {
		prev := from
		if i > 0 {
			prev = ps[i-1].At
		}
		sum += p.V * p.At.Sub(prev).Seconds()
	}
	return sum
}

// The queue page's charts on a real server: jobs enqueued at a known pace while a
// slower worker drains them, with no page open meanwhile (the background sampler
// draws the points). The enqueued rate's points are near the pace, the rates add
// up to the jobs enqueued and done, the waiting depth grows and falls back to 0,
// and the oldest job's age grows while jobs wait.
func TestChartsShowTheFlow(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 90*time.Second)
	const every = 200 * time.Millisecond
	adm, srv := serveJS(t, js, ui.SampleEvery(every))
	c := browser(t)
	p, err := producer.New(ctx, js, "flow")
	if err != nil {
		t.Fatal(err)
	}
	runSlowWorker(t, js, "flow", 100*time.Millisecond, 1) // slower than the producer

	// The history has the queue, empty, before the first job.
	testenv.Eventually(t, 10*time.Second, "the queue's first samples", func() bool {
		_, page, _ := get(t, c, srv.URL+"/queues/flow")
		return len(chartsOf(t, page)["depth"]["waiting"]) >= 2
	})
	const pace, total = 20, 80 // jobs per second, jobs
	start := time.Now()
	tick := time.NewTicker(time.Second / pace)
	for i := range total {
		<-tick.C
		if _, err := p.Enqueue(ctx, []byte("x"), producer.ID(fmt.Sprintf("j-%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	tick.Stop()
	end := time.Now()
	achieved := total / end.Sub(start).Seconds()
	testenv.Eventually(t, 30*time.Second, "the worker to drain the queue", func() bool {
		qi, err := adm.Queue(ctx, "flow")
		return err == nil && qi.Pending == 0 && qi.Running == 0 && qi.Jobs == 0
	})
	time.Sleep(3 * every) // a sample or two of the drained queue

	_, page, _ := get(t, c, srv.URL+"/queues/flow")
	charts := chartsOf(t, page)
	in, out, dead := charts["rates"]["in"], charts["rates"]["out"], charts["rates"]["dead"]
	waiting, oldest := charts["depth"]["waiting"], charts["age"]["oldest"]
	// Sampled while no page was open: about a point per interval over the enqueueing.
	var during []float64
	for _, pt := range in {
		if pt.At.After(start.Add(2*every)) && pt.At.Before(end) {
			during = append(during, pt.V)
		}
	}
	if want := int(end.Sub(start) / every / 3); len(during) < want {
		t.Fatalf("%d points of the enqueued rate over the %s of enqueueing; want %d at least (one per %s, sampled in the background)",
			len(during), end.Sub(start).Round(time.Millisecond), want, every)
	}
	slices.Sort(during)
	t.Logf("pace %.1f/s; %d enqueued-rate points over the enqueueing, %v", achieved, len(during), during)
	if med := during[len(during)/2]; med < achieved/2 || med > achieved*1.5 {
		t.Errorf("the enqueued rate's median point is %.1f/s; want about %.1f/s (the pace achieved): %v", med, achieved, during)
	}
	// The rates add up to the jobs: every job enqueued, and left, once.
	if n := integral(in, in[0].At); math.Abs(n-total) > 1 {
		t.Errorf("the enqueued rate's points add up to %.2f jobs; want %d", n, total)
	}
	if n := integral(out, out[0].At); math.Abs(n-total) > 1 {
		t.Errorf("the left rate's points add up to %.2f jobs; want %d", n, total)
	}
	if slices.ContainsFunc(dead, func(p chartPoint) bool { return p.V != 0 }) {
		t.Errorf("dead points %v; want all 0", dead)
	}
	// The waiting depth grew (the worker is slower than the producer), then fell to 0;
	// the oldest job waited, then there was none.
	peak, oldestPeak := 0.0, 0.0
	for _, pt := range waiting {
		peak = max(peak, pt.V)
	}
	for _, pt := range oldest {
		oldestPeak = max(oldestPeak, pt.V)
	}
	t.Logf("waiting peaks at %v, the oldest job's age at %vs; %d points in all", peak, oldestPeak, len(waiting))
	if peak < 10 || peak > total || waiting[len(waiting)-1].V != 0 {
		t.Errorf("waiting points peak at %v and end at %v; want a backlog of 10 to %d, then 0", peak, waiting[len(waiting)-1].V, total)
	}
	if oldestPeak < 0.5 || oldest[len(oldest)-1].V != 0 {
		t.Errorf("oldest job's age peaks at %vs and ends at %vs; want 0.5 s or more, then 0", oldestPeak, oldest[len(oldest)-1].V)
	}
	// The axis says the top and the span as text.
	if !regexp.MustCompile(`data-axis="max"[^>]*>\d+/s</text>`).MatchString(page) || !strings.Contains(page, `data-axis="from"`) {
		t.Errorf("the rates chart has no labelled axes")
	}

	// The queues page's sparkline carries the same flow; the summary's refresh
	// carries the charts.
	_, page, _ = get(t, c, srv.URL+"/")
	if spark := chartsOf(t, page)["spark"]; len(spark["in"]) < 5 || len(spark["out"]) < 5 {
		t.Errorf("the queues page's sparkline has %d and %d points; want the history's", len(spark["in"]), len(spark["out"]))
	}
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/queues/flow?fragment=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("HX-Request", "true")
	_, frag, _ := fetch(t, c, req)
	if got := chartsOf(t, frag); len(got["rates"]["in"]) < 5 || len(got["depth"]["running"]) < 5 || strings.Contains(frag, "<h2 id=\"jobs\">") {
		t.Errorf("the summary's refresh carries charts %v; want the charts only with the summary", got)
	}
}

// The rates chart counts failed attempts from the records the sampler reads: six
// jobs that each fail twice before they commit make twelve.
func TestChartsCountFailedAttempts(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	const every = 200 * time.Millisecond
	_, srv := serveJS(t, js, ui.SampleEvery(every))
	c := browser(t)
	p, err := producer.New(ctx, js, "flaky")
	if err != nil {
		t.Fatal(err)
	}
	runWorker(t, js, "flaky", consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if j.Attempt() <= 2 {
			return errors.New("not yet")
		}
		return nil
	}), consumer.Backoff(consumer.Constant(300*time.Millisecond)))
	testenv.Eventually(t, 10*time.Second, "the queue's first tallied samples", func() bool {
		_, page, _ := get(t, c, srv.URL+"/queues/flaky")
		return len(chartsOf(t, page)["rates"]["failed"]) >= 2
	})
	for i := range 6 {
		if _, err := p.Enqueue(ctx, nil, producer.ID(fmt.Sprintf("f-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		if r, err := p.Wait(ctx, fmt.Sprintf("f-%d", i)); err != nil || r.State != producer.StateDone {
			t.Fatalf("f-%d: %+v, %v", i, r, err)
		}
	}
	var failed []chartPoint
	defer func() { t.Logf("failed points: %v (sum %.2f)", failed, integral(failed, failed[0].At)) }()
	testenv.Eventually(t, 10*time.Second, "twelve failed attempts on the chart", func() bool {
		_, page, _ := get(t, c, srv.URL+"/queues/flaky")
		failed = chartsOf(t, page)["rates"]["failed"]
		// The points are rounded to a thousandth and their times to the millisecond.
		return math.Abs(integral(failed, failed[0].At)-12) < 0.1
	})
}
