// Command service is a complete workq service in one program: a producer that
// enqueues typed jobs, a worker that runs them with retries, a periodic schedule,
// Prometheus metrics and a health check over HTTP, and a graceful shutdown on
// SIGINT or SIGTERM.
//
// With a NATS server (JetStream enabled):
//
//	NATS_URL=nats://127.0.0.1:4222 go run ./examples/service
//
// With no URL it starts an embedded server whose data is removed at exit:
//
//	go run ./examples/service
//
// Metrics are on http://127.0.0.1:9464/metrics, health on /healthz. The first
// Ctrl-C stops pulling jobs and lets running ones finish; a second exits at once.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/embedded"
	"github.com/workq/workq/producer"
)

// config is what the service is told at start.
type config struct {
	natsURL     string        // "" starts an embedded server
	metricsAddr string        // where /metrics and /healthz listen
	signupEvery time.Duration // how often the stand-in producer enqueues a mail
	digestSpec  string        // the Digest schedule
	mailer      Mailer        // nil: log the mails
}

func main() {
	cfg := config{digestSpec: "@every 1m"}
	flag.StringVar(&cfg.natsURL, "nats", os.Getenv("NATS_URL"), "NATS server URL (default $NATS_URL; empty: start an embedded server)")
	flag.StringVar(&cfg.metricsAddr, "metrics-addr", "127.0.0.1:9464", "serve /metrics and /healthz at this address")
	flag.DurationVar(&cfg.signupEvery, "signup-every", 2*time.Second, "enqueue a welcome mail this often")
	flag.Parse()

	// The first SIGINT or SIGTERM ends ctx: the worker drains. stop then restores
	// the default handling, so a second signal exits at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()

	log := slog.Default()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("service failed", "err", err)
		os.Exit(1)
	}
}

// run runs the service until ctx ends, then shuts it down in order: the producer
// stops, the worker drains its running jobs, the HTTP server and the connection
// close.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	url := cfg.natsURL
	if url == "" {
		srv, err := embedded.Run()
		if err != nil {
			return fmt.Errorf("start an embedded server: %w", err)
		}
		defer srv.Close()
		url = srv.URL()
		log.Info("no NATS URL given: started an embedded server", "url", url, "data", srv.StoreDir())
	}
	nc, err := nats.Connect(url, nats.Name("workq example service"))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	p, err := producer.New(ctx, js, queueName, producer.Metrics(reg))
	if err != nil {
		return err
	}
	depth, err := producer.NewQueueCollector(js, []string{queueName}) // queue depth, read at scrape time
	if err != nil {
		return err
	}
	reg.MustRegister(depth)

	mailer := cfg.mailer
	if mailer == nil {
		mailer = logMailer{log}
	}
	mux, err := newMux(mailer, log)
	if err != nil {
		return err
	}
	opts := append(retries(), consumer.Concurrency(8), consumer.Metrics(reg), consumer.Logger(log))
	w, err := consumer.New(ctx, js, queueName, mux, opts...)
	if err != nil {
		return err
	}

	// Adding a schedule exactly as it is changes nothing, so every instance of the
	// service may add it at start. The server fires it; nothing here has to run.
	payload, err := json.Marshal(Digest{})
	if err != nil {
		return err
	}
	if _, err := p.Schedule(ctx, "digest", cfg.digestSpec, payload, producer.Kind(Digest{}.Kind())); err != nil {
		return err
	}

	healthy := func() error {
		if !nc.IsConnected() {
			return errors.New("not connected to NATS")
		}
		return w.Health()
	}
	stopHTTP, err := serveHTTP(cfg.metricsAddr, reg, healthy, log)
	if err != nil {
		return err
	}
	defer stopHTTP()

	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produce(ctx, p, cfg.signupEvery, log)
	}()

	log.Info("service started", "queue", queueName, "metrics", cfg.metricsAddr)
	err = w.Run(ctx) // until ctx ends; then it stops pulling and drains
	<-produced
	log.Info("service stopped", "committed", w.Stats().Committed)
	return err
}

// produce stands for the part of a service that makes work: a sign-up every
// `every`, each enqueuing a welcome mail. The job id comes from the sign-up, so
// enqueuing it again (after a timeout, say) stores nothing new within the queue's
// duplicate window.
func produce(ctx context.Context, p *producer.Producer, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		user := fmt.Sprintf("user%d", time.Now().UnixMilli())
		mail := SendEmail{To: user + "@example.com", Subject: "Welcome", Body: "Thanks for signing up."}
		if _, err := p.EnqueueArgs(ctx, mail, producer.ID("welcome-"+user)); err != nil && ctx.Err() == nil {
			log.Warn("enqueue failed; the next sign-up will try again", "err", err)
		}
	}
}

// serveHTTP serves the registry on /metrics and health on /healthz (200, or 503
// with the reason) at addr, and returns a function that stops it.
func serveHTTP(addr string, reg *prometheus.Registry, healthy func() error, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
