package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/embedded"
	"github.com/workq/workq/testenv"
)

// The whole service on a real server: the stand-in producer's mails are sent, the
// schedule fires, both show in the metrics, /healthz says ok, and the end of ctx
// stops it cleanly.
func TestServiceRunsAndStops(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMailer{}
	cfg := config{
		natsURL:     env.URL(),
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", port),
		signupEvery: 100 * time.Millisecond,
		digestSpec:  "@every 1s",
		mailer:      m,
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()

	base := "http://" + cfg.metricsAddr
	committed := func(kind string) string {
		return fmt.Sprintf(`workq_jobs_processed_total{kind=%q,outcome="committed",queue="emails"}`, kind)
	}
	testenv.Eventually(t, 20*time.Second, "mails sent, a digest run, both counted in /metrics", func() bool {
		body, code := get(base + "/metrics")
		return code == http.StatusOK && len(m.keys()) >= 2 &&
			strings.Contains(body, committed("send_email")) && strings.Contains(body, committed("digest"))
	})
	if body, code := get(base + "/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz: %d %q, want 200 ok", code, body)
	}

	stop()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("run returned %v after ctx ended, want nil", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return within 15s after ctx ended")
	}
	if _, code := get(base + "/metrics"); code != 0 {
		t.Errorf("/metrics still served after run returned (status %d)", code)
	}
}

// get returns the body and status of a GET, or status 0 if it failed.
func get(url string) (string, int) {
	resp, err := http.Get(url)
	if err != nil {
		return "", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}
