package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/cmd/workq/internal/bench"
	"github.com/workq/workq/embedded"
)

// benchServer is where `workq bench` runs: the scenarios' environment, the report's
// description of the server, and what to do at the end.
type benchServer struct {
	env   bench.Env
	desc  string
	close func()
}

// benchServer connects to --server, or starts the embedded single server or, with
// --cluster, the embedded cluster (each with --sync-always if asked).
func (a *app) benchServer(ctx context.Context, f benchFlags) (*benchServer, error) {
	if f.external {
		return a.benchExternal(ctx, f)
	}
	var opts []embedded.Option
	fsync := "lazy fsync"
	if f.syncAlways {
		opts = append(opts, embedded.SyncAlways())
		fsync = "sync always"
	}
	var (
		urls, dir string
		stop      func()
	)
	what := "the embedded server"
	if f.cluster > 0 {
		what = fmt.Sprintf("the embedded %d-node cluster", f.cluster)
		// RunCluster returns once the JetStream meta leader is elected and sees
		// every node, so replicated streams can be placed at once.
		cl, err := embedded.RunCluster(f.cluster, opts...)
		if err != nil {
			return nil, fmt.Errorf("start %s: %v", what, err)
		}
		urls, dir, stop = cl.URL(), cl.StoreDir(), cl.Close
	} else {
		srv, err := embedded.Run(opts...)
		if err != nil {
			return nil, fmt.Errorf("start %s: %v", what, err)
		}
		urls, dir, stop = srv.URL(), srv.StoreDir(), srv.Close
	}
	// Every node's URL: the client picks one and fails over to the others.
	nc, err := nats.Connect(urls, nats.Name("workq bench"))
	if err != nil {
		stop()
		return nil, fmt.Errorf("connect to %s: %v", what, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		stop()
		return nil, err
	}
	s := &benchServer{
		env: bench.Env{JS: js, Replicas: f.replicas, URL: urls, Dial: func(_ context.Context, url string) (*nats.Conn, error) {
			return nats.Connect(url, nats.Name("workq bench"))
		}},
		desc:  fmt.Sprintf("embedded, %s (file storage in %s)", fsync, dir),
		close: func() { nc.Close(); stop() },
	}
	if f.cluster > 0 {
		s.desc = fmt.Sprintf("embedded %d-node cluster, R%d, %s (file storage in %s)", f.cluster, f.replicas, fsync, dir)
	}
	return s, nil
}

// benchExternal connects to the running server(s) of --server and deletes, at the
// end, the streams the scenarios left there.
func (a *app) benchExternal(ctx context.Context, f benchFlags) (*benchServer, error) {
	c, err := a.connect(ctx, "bench", false)
	if err != nil {
		return nil, err
	}
	before := benchStreams(ctx, c.js)
	s := &benchServer{
		env: bench.Env{JS: c.js, Replicas: f.replicas, URL: a.conn.server, Dial: func(ctx context.Context, url string) (*nats.Conn, error) {
			b := *a
			b.conn.server = url
			c, err := b.connect(ctx, "bench", false)
			if err != nil {
				return nil, err
			}
			return c.nc, nil
		}},
		desc: fmt.Sprintf("%s, R%d", c.url, f.replicas),
		close: func() {
			before.clean(ctx, c.js)
			c.Close()
		},
	}
	return s, nil
}

// benchLeftovers deletes the streams and buckets the scenarios created on a running
// server (those named like the bench's queues, locks and limiters that were not
// there before the run), so that --server leaves the server as it found it. Some
// scenarios clean up after themselves; the enqueue and process ones do not.
type benchLeftovers map[string]bool

func benchStreams(ctx context.Context, js jetstream.JetStream) benchLeftovers {
	seen := benchLeftovers{}
	l := js.StreamNames(ctx)
	for name := range l.Name() {
		seen[name] = true
	}
	return seen
}

func isBenchStream(name string) bool {
	for _, p := range []string{"WORKQ_bench-", "KV_WORKQ_bench-", "KV_BENCH_LOCKS-", "WORKQ_LIMIT_bench-", "BENCH_RAW_LIMIT-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// clean deletes the bench streams that are on the server now and were not before.
func (before benchLeftovers) clean(ctx context.Context, js jetstream.JetStream) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for name := range benchStreams(ctx, js) {
		if isBenchStream(name) && !before[name] {
			_ = js.DeleteStream(ctx, name)
		}
	}
}
