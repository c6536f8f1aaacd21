package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/embedded"
)

// Server is where Run runs the scenarios: their environment, the report's
// description of the server, and what to do at the end (Close).
type Server struct {
	// Env is the scenarios' environment: the connection, the replica count, the URL
	// and dialer of extra connections. Run adds its Config's group commit and job
	// time to a copy.
	Env        Env
	desc       string
	syncAlways bool      // every write is fsynced: auto group commit is on
	started    time.Time // when it was asked for: the report's time counts its start
	close      func()
}

// Close ends what the server holds: an embedded server or cluster is stopped (its
// store removed), a running server is left as it was found.
func (s *Server) Close() { s.close() }

// Embedded starts nats-server in this process with file storage in a temporary
// directory, removed by Close: a single server when nodes is 0, else a cluster of
// nodes nodes (3 to 5) on which everything is created with nodes replicas, so that
// workq and raw JetStream compare like with like. syncAlways makes every node fsync
// every write (sync_interval: always), which is what durable processing costs;
// false fsyncs lazily, as nats-server does by default (every 2 minutes).
func Embedded(nodes int, syncAlways bool) (*Server, error) {
	started := time.Now()
	var opts []embedded.Option
	fsync := "lazy fsync"
	if syncAlways {
		opts = append(opts, embedded.SyncAlways())
		fsync = "sync always"
	}
	var (
		urls, dir string
		stop      func()
	)
	what := "the embedded server"
	if nodes > 0 {
		what = fmt.Sprintf("the embedded %d-node cluster", nodes)
		// RunCluster returns once the JetStream meta leader is elected and sees
		// every node, so replicated streams can be placed at once.
		cl, err := embedded.RunCluster(nodes, opts...)
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
	s := &Server{
		Env: Env{JS: js, Replicas: max(nodes, 1), URL: urls, Dial: func(_ context.Context, url string) (*nats.Conn, error) {
			return nats.Connect(url, nats.Name("workq bench"))
		}},
		desc:       fmt.Sprintf("embedded, %s (file storage in %s)", fsync, dir),
		syncAlways: syncAlways,
		started:    started,
		close:      func() { nc.Close(); stop() },
	}
	if nodes > 0 {
		s.desc = fmt.Sprintf("embedded %d-node cluster, R%d, %s (file storage in %s)", nodes, s.Env.replicas(), fsync, dir)
	}
	return s, nil
}

// External is a running server that env reaches (env.Replicas set as asked), at
// url, the URL named in the report. Close deletes the streams and buckets the
// scenarios left there, those named like the bench's queues, locks and limiters
// that were not there before, so that the server is left as it was found (some
// scenarios clean up after themselves; the enqueue and process ones do not); then
// it calls disconnect, which ends env's connection.
func External(ctx context.Context, env Env, url string, disconnect func()) *Server {
	started := time.Now()
	before := streams(ctx, env.JS)
	return &Server{
		Env:     env,
		desc:    fmt.Sprintf("%s, R%d", url, env.replicas()),
		started: started,
		close: func() {
			before.clean(ctx, env.JS)
			disconnect()
		},
	}
}

// streamSet is a set of stream names.
type streamSet map[string]bool

// streams is the streams on the server now.
func streams(ctx context.Context, js jetstream.JetStream) streamSet {
	seen := streamSet{}
	l := js.StreamNames(ctx)
	for name := range l.Name() {
		seen[name] = true
	}
	return seen
}

// isBenchStream says whether a stream is one the scenarios create: a queue's or a
// bucket's named by queueName, or a lock's or limiter's bucket.
func isBenchStream(name string) bool {
	for _, p := range []string{"WORKQ_bench-", "KV_WORKQ_bench-", "KV_BENCH_LOCKS-", "WORKQ_LIMIT_bench-", "BENCH_RAW_LIMIT-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// clean deletes the bench streams that are on the server now and were not before.
func (before streamSet) clean(ctx context.Context, js jetstream.JetStream) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for name := range streams(ctx, js) {
		if isBenchStream(name) && !before[name] {
			_ = js.DeleteStream(ctx, name)
		}
	}
}
