package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/faultproxy"
)

// startStaller starts w-stall, whose link to the server freezes (a proxy stops
// forwarding) during its first job for three times AckWait — as a long GC pause, a
// swapped-out process or a network partition would. The job moves on to another
// worker; when w-stall comes back and commits, the commit is refused.
func (d *demo) startStaller(ctx context.Context, wg *sync.WaitGroup) error {
	proxy, err := faultproxy.New(d.srv.URL())
	if err != nil {
		return err
	}
	js, err := d.jetstream(proxy.URL(), "demo w-stall")
	if err != nil {
		return err
	}
	var once sync.Once
	normal := d.handle("w-stall")
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		first := false
		once.Do(func() { first = true })
		if !first {
			return normal(ctx, j)
		}
		defer close(d.stallDone)
		_, _ = j.FencingToken(ctx) // claim the job now, as a long job would have
		d.stallJob.Store(j.ID())
		stall := 2*d.f.ackWait + d.f.ackWait/4
		d.out.event("⏸", "w-stall freezes for %s while running %s (AckWait is %s)", stall, j.ID(), d.f.ackWait)
		proxy.Pause()
		time.Sleep(stall)
		proxy.Resume()
		d.out.event("▶", "w-stall wakes up and tries to commit %s", j.ID())
		return nil // the commit is refused: the job was reassigned
	})
	w, err := consumer.New(ctx, js, demoQueue, h, d.workerOptions("w-stall", 1, d.out.logger())...)
	if err != nil {
		return err
	}
	d.workers = append(d.workers, w)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer proxy.Close()
		_ = w.Run(ctx)
	}()
	return nil
}

// startKiller starts w-kill, which dies during its first job: its connection is
// closed mid-job with nothing acknowledged, as when a process is killed.
func (d *demo) startKiller(ctx context.Context, wg *sync.WaitGroup) error {
	nc, err := nats.Connect(d.srv.URL(), nats.Name("demo w-kill"), nats.NoReconnect())
	if err != nil {
		return err
	}
	d.conns = append(d.conns, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var once sync.Once
	dead := make(chan struct{})
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		select {
		case <-dead:
			return errors.New("dead")
		default:
		}
		_, _ = j.FencingToken(ctx) // the claim is written: this run counts as attempt 1
		d.killed.Store(j.ID(), struct{}{})
		once.Do(func() {
			d.killJob.Store(j.ID())
			d.out.event("💥", "w-kill dies while running %s (connection gone, nothing acknowledged)", j.ID())
			nc.Close()
			close(dead)
			close(d.killDone)
		})
		return errors.New("dead")
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := consumer.New(ctx, js, demoQueue, h, d.workerOptions("w-kill", 2, quiet)...)
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(ctx) }() // its counters stay out of the totals
	return nil
}
