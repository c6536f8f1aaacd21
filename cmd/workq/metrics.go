package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/workq/workq/producer"
)

// metricsFlagHelp documents --metrics-addr for work and server.
const metricsFlagHelp = "serve Prometheus metrics on /metrics and health on /healthz at this address; " +
	"a port alone (:9464) listens on 127.0.0.1 only, give a host (0.0.0.0:9464) to listen elsewhere (default: off)"

func addMetricsFlag(fl *pflag.FlagSet, addr *string) {
	fl.StringVar(addr, "metrics-addr", "", metricsFlagHelp)
}

// metricsListenAddr checks --metrics-addr and makes it loopback when it names no
// host: ":9464" and "9464" listen on 127.0.0.1:9464, so that metrics are not exposed
// beyond the machine unless asked for.
func metricsListenAddr(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	return listenAddr("--metrics-addr", s)
}

// listenAddr checks the address flag flag gave, s, and makes it loopback when it
// names no host: ":8090" and "8090" listen on 127.0.0.1:8090.
func listenAddr(flag, s string) (string, error) {
	if _, err := strconv.Atoi(s); err == nil {
		s = ":" + s
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", usageError{fmt.Errorf("%s %q: want host:port or :port (%v)", flag, s, err)}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", usageError{fmt.Errorf("%s %q: port %q is not 0 to 65535", flag, s, port)}
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// newRegistry is a registry with the Go runtime and process collectors, to which
// commands add workq's.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// metricsServer serves /metrics and /healthz.
type metricsServer struct {
	srv  *http.Server
	addr string // where it listens, with the port picked for ":0"
	done chan struct{}
}

// serveMetrics listens on addr (already through metricsListenAddr) and serves reg on
// /metrics and health on /healthz: 200 while healthy returns nil, 503 with its
// error otherwise.
func serveMetrics(addr string, reg *prometheus.Registry, healthy func() error) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: cannot listen on %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError, // a failing collector costs its series, not the scrape
		MaxRequestsInFlight: 4,
		EnableOpenMetrics:   true, // for the exemplars (trace ids) of the job duration histogram under --otel
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := healthy(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "unhealthy: %v\n", err)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	m := &metricsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

// Close stops serving, letting a scrape under way finish for up to 2 seconds.
func (m *metricsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.srv.Shutdown(ctx); err != nil {
		_ = m.srv.Close()
	}
	<-m.done
}

// errNotConnected is the health of a process whose NATS connection is down.
var errNotConnected = errors.New("not connected to NATS")

// serveQueueMetrics adds a queue collector for queues (every queue when empty) to
// reg and serves it at addr, healthy while nc is connected and more (if not nil)
// returns nil.
func serveQueueMetrics(addr string, reg *prometheus.Registry, nc *nats.Conn, js jetstream.JetStream, queues []string, more func() error) (*metricsServer, error) {
	coll, err := producer.NewQueueCollector(js, queues)
	if err != nil {
		return nil, err
	}
	if err := reg.Register(coll); err != nil {
		return nil, fmt.Errorf("queue metrics: %w", err)
	}
	return serveMetrics(addr, reg, func() error {
		if !nc.IsConnected() {
			return fmt.Errorf("%w (%s)", errNotConnected, nc.Status())
		}
		if more != nil {
			return more()
		}
		return nil
	})
}

// serveServerMetrics serves the metrics of every queue of the embedded server at
// url through a client connection of its own (opts added to its options: credentials,
// an in-process connection); healthy while that connection is up. It returns where it
// listens and how to stop.
func serveServerMetrics(addr, url string, opts ...nats.Option) (string, func(), error) {
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name("workq server metrics"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}, opts...)...)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: connect to the embedded server: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return "", nil, err
	}
	ms, err := serveQueueMetrics(addr, newRegistry(), nc, js, nil, nil)
	if err != nil {
		nc.Close()
		return "", nil, err
	}
	return ms.addr, func() { ms.Close(); nc.Close() }, nil
}
