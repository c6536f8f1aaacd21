package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// scrape GETs url and returns the status and body; status 0 if nothing answered.
func scrape(url string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sample finds the value of metric name with the given labels (name, value pairs)
// in a text exposition; ok is false if no such series is there.
func sample(body, name string, labels ...string) (v float64, ok bool) {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series, val := line[:i], line[i+1:]
		match := true
		for j := 0; j+1 < len(labels); j += 2 {
			if !strings.Contains(series, labels[j]+`="`+labels[j+1]+`"`) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return 0, false
		}
		return f, true
	}
	return 0, false
}

// workq work --metrics-addr serves the worker's and the queue's metrics on
// /metrics, on loopback when given only a port, and /healthz says whether the
// worker is connected to NATS: 200, then 503 once its server is gone.
func TestWorkServesMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, url, err := startNATS(dir, "-js", "-sd", filepath.Join(dir, "js"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(srv) })
	const q = "metrics"
	ok(t, `{"id":"m-1","payload":"fine","kind":"mail"}
{"id":"m-2","payload":"perm","kind":"mail"}
`, "enqueue", q, "--ndjson", "-s", url)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	w := start(t, "work", q, "-s", url, "--metrics-addr", ":"+strconv.Itoa(port), "--",
		"sh", "-c", `[ "$(cat)" = perm ] && exit 100; exit 0`)

	// The worker's own counters move as jobs finish, but the queue gauges come from
	// the queue collector, which caches a read of the server for 5s: a scrape before
	// the dead letter existed keeps serving dead_letters 0 until the cache expires.
	// So wait for one scrape in which every asserted value holds, not for the first
	// one that counts the jobs.
	want := []struct {
		name  string
		value float64
	}{
		{"workq_jobs_in_flight", 0},
		{"workq_queue_up", 1},
		{"workq_queue_dead_letters", 1},
	}
	var body string
	var code int
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body = scrape(base + "/metrics")
		var missing []string
		committed, _ := sample(body, "workq_jobs_processed_total", "queue", q, "kind", "mail", "outcome", "committed")
		dead, _ := sample(body, "workq_jobs_processed_total", "queue", q, "kind", "mail", "outcome", "dead")
		if code != http.StatusOK || committed != 1 || dead != 1 {
			missing = append(missing, fmt.Sprintf("status %d, committed %v, dead %v (want 200, 1, 1)", code, committed, dead))
		}
		for _, m := range want {
			if v, found := sample(body, m.name, "queue", q); !found || v != m.value {
				missing = append(missing, fmt.Sprintf("%s{queue=%q} = %v (found %v), want %v", m.name, q, v, found, m.value))
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, /metrics still has %s; stderr: %s\nlast scrape:\n%s", strings.Join(missing, "; "), w.stderr(), body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, found := sample(body, "workq_job_handler_duration_seconds_count", "queue", q, "kind", "mail"); !found {
		t.Error("no handler duration histogram for kind mail")
	}
	if _, found := sample(body, "go_goroutines"); !found {
		t.Error("no Go runtime metrics")
	}
	if code, b := scrape(base + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while connected: %d %q, want 200", code, b)
	}
	// The line is logged once the listener is up, so a scrape can beat it: wait.
	waitFor(t, 10*time.Second, "the worker to say where it serves metrics", func() bool {
		return strings.Contains(w.stderr(), "serving metrics")
	})

	stopProcess(srv)
	waitFor(t, 10*time.Second, "/healthz to report the lost connection", func() bool {
		code, _ := scrape(base + "/healthz")
		return code == http.StatusServiceUnavailable
	})
	// The test's end kills the worker: with its server gone it would take a while to drain.
}

// A bad --metrics-addr is a usage error, before anything connects.
func TestWorkMetricsAddrInvalid(t *testing.T) {
	t.Parallel()
	r := wq(t, "", "work", "q", "--metrics-addr", "nope", "--", "true")
	oneLine(t, r, 2, "--metrics-addr")
}

// workq server --metrics-addr serves the state of every queue on its server.
func TestServerServesQueueMetrics(t *testing.T) {
	t.Parallel()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	mport, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	s := start(t, "server", "--port", strconv.Itoa(port), "--data", t.TempDir(), "--metrics-addr", ":"+strconv.Itoa(mport))
	waitFor(t, 20*time.Second, "server listening", func() bool { return strings.Contains(s.stdout(), "listening on "+url) })
	ok(t, "", "-s", url, "enqueue", "served-a", "x")
	ok(t, "x\ny\n", "-s", url, "enqueue", "served-b")
	base := "http://127.0.0.1:" + strconv.Itoa(mport)
	waitFor(t, 20*time.Second, "both queues on /metrics", func() bool {
		code, b := scrape(base + "/metrics")
		a, _ := sample(b, "workq_queue_jobs", "queue", "served-a")
		bb, _ := sample(b, "workq_queue_jobs", "queue", "served-b")
		return code == http.StatusOK && a == 1 && bb == 2
	})
	if code, b := scrape(base + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d %q, want 200", code, b)
	}
	s.signal(t, syscall.SIGINT)
	if code := s.wait(t, 20*time.Second); code != 0 {
		t.Errorf("server exited %d; stderr: %s", code, s.stderr())
	}
}

// /healthz of workq work also reports a worker that cannot pull: its queue's
// workers' consumer was replaced by one it cannot use.
func TestWorkHealthzReportsUnusableConsumer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, url, err := startNATS(dir, "-js", "-sd", filepath.Join(dir, "js"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(srv) })
	const q = "health"
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	start(t, "work", q, "-s", url, "--ack-wait", "1s", "--metrics-addr", ":"+strconv.Itoa(port), "--", "true")
	waitFor(t, 15*time.Second, "/healthz to answer 200", func() bool {
		code, _ := scrape(base + "/healthz")
		return code == http.StatusOK
	})
	js := jsClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The worker re-creates a consumer it finds gone: replace it until this test's
	// incompatible one is the one that stays (the worker can win the race in between).
	for {
		if err := js.DeleteConsumer(ctx, "WORKQ_"+q, "workers"); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
		_, err := js.CreateConsumer(ctx, "WORKQ_"+q, jetstream.ConsumerConfig{
			Durable: "workers", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
			FilterSubjects: []string{"workq." + q + ".jobs", "workq." + q + ".jobs.>"},
		})
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			t.Fatal(err)
		}
	}
	waitFor(t, 15*time.Second, "/healthz to report the unusable consumer", func() bool {
		code, body := scrape(base + "/healthz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "incompatible")
	})
}
