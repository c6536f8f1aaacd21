package embedded_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/embedded"
)

// A server for a program: started on a free loopback port, with a temporary store
// that Close removes.
func ExampleRun() {
	srv, err := embedded.Run()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	nc, err := nats.Connect(srv.URL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		log.Fatal(err)
	}
	ack, err := js.Publish(ctx, "orders.new", []byte("order 1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored in", ack.Stream, "as message", ack.Sequence)
	// Output: stored in ORDERS as message 1
}

// A small deployment: data in a directory of its own, kept across runs; clients
// authenticate; every write is fsynced.
func ExampleRun_deployment() {
	dir, err := os.MkdirTemp("", "example-data-") // a real program names its own
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	publish := func() uint64 {
		srv, err := embedded.Run(embedded.Dir(dir), embedded.UserPassword("app", "s3cret"), embedded.SyncAlways())
		if err != nil {
			log.Fatal(err)
		}
		defer srv.Close() // keeps dir: it was given, not created by Run
		nc, err := nats.Connect(srv.URL(), srv.ClientOptions()...)
		if err != nil {
			log.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			log.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events"}}); err != nil {
			log.Fatal(err)
		}
		ack, err := js.Publish(ctx, "events", []byte("started"))
		if err != nil {
			log.Fatal(err)
		}
		return ack.Sequence
	}
	fmt.Println("first run stored message", publish())
	fmt.Println("second run stored message", publish())
	// Output:
	// first run stored message 1
	// second run stored message 2
}

// A 3-node cluster in one process, for trying replicated streams.
func ExampleRunCluster() {
	cl, err := embedded.RunCluster(3, embedded.TmpfsStore())
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()

	nc, err := nats.Connect(cl.URL()) // every node's URL: the client fails over
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The new stream's first leader answers its creation; when leadership moves at
	// once the answer can be lost. Creating the same stream again is answered.
	var s jetstream.Stream
	for {
		tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
		s, err = js.CreateStream(tctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3})
		tcancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	info := s.CachedInfo()
	fmt.Printf("%d nodes, stream %s on a leader and %d replicas\n", cl.Size(), info.Config.Name, len(info.Cluster.Replicas))
	// Output: 3 nodes, stream R3 on a leader and 2 replicas
}

// The server's warnings and errors go to the program's own logger.
func ExampleLogger() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := embedded.Run(embedded.Logger(logger))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	fmt.Println(srv.URL()[:len("nats://127.0.0.1:")])
	// Output: nats://127.0.0.1:
}
