package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/internal/workflow"
)

// QueueCollector is a prometheus.Collector that reads queues' state from the server
// when scraped: jobs in the stream, jobs not yet delivered, jobs delivered and not
// acknowledged, of those the redelivered ones, dead letters, the age of the oldest
// job, delayed jobs waiting for their time, periodic schedules, and the jobs waiting
// in sequences. Register it once per registry (reg.MustRegister(c)) with every queue
// to watch; it creates nothing on the server.
//
// A scrape reads each queue with five requests to the server (stream info, consumer
// info, the schedules' count, dead-letter stream info, the sequences' links), two
// more to find the oldest job when the stream holds schedules, and, when a sequence
// has jobs waiting, one per 1000 of them (the records of the jobs they wait for) and
// one for the oldest (plus one per 100 000 such jobs for the listing). The
// result is cached for CollectorCache (default DefaultCollectorCache, 5 s), and
// scrapes that arrive while a read is under way wait for it rather than start their
// own, so frequent or concurrent scrapes never hammer the server. A read is bounded
// by CollectorTimeout (default DefaultCollectorTimeout, 3 s): a scrape of an
// unreachable server returns within it, with workq_queue_up 0 for each queue.
type QueueCollector struct {
	js       jetstream.JetStream
	queues   []queue.Names // nil: every workq queue on the server
	cacheFor time.Duration
	timeout  time.Duration

	mu      sync.Mutex // held during a read: concurrent scrapes share it
	readAt  time.Time
	samples []queueSample
}

// queueSample is one queue's state as last read.
type queueSample struct {
	queue                                        string
	ok                                           bool
	jobs, pending, ackPending, redelivered, dead float64
	scheduled, schedules, paused                 float64
	oldest                                       time.Time // zero when the queue is empty
	seqWaiting, seqKeys                          float64
	seqOldest                                    time.Time // zero when no job waits in a sequence
}

// CollectorOption configures a QueueCollector. NewQueueCollector skips nil options.
type CollectorOption func(*QueueCollector) error

// Defaults of the collector's options.
const (
	// DefaultCollectorCache is how long a read of the queues' state serves scrapes
	// (CollectorCache).
	DefaultCollectorCache = 5 * time.Second
	// DefaultCollectorTimeout bounds one read of the queues' state
	// (CollectorTimeout).
	DefaultCollectorTimeout = 3 * time.Second
)

// CollectorCache sets how long a read of the queues' state serves scrapes. Default
// DefaultCollectorCache (5 s): a fraction of any usual scrape interval, so values
// stay fresh, while a burst of scrapes (several Prometheus servers, a dashboard
// refreshing) reads the server once. 0 reads on every scrape.
func CollectorCache(d time.Duration) CollectorOption {
	return func(c *QueueCollector) error {
		if d < 0 {
			return option.Invalid("CollectorCache", d, "0 or more")
		}
		c.cacheFor = d
		return nil
	}
}

// CollectorTimeout bounds one read of the queues' state. Default
// DefaultCollectorTimeout (3 s), below Prometheus's default scrape timeout (10 s): a
// scrape of an unreachable server returns in time, reporting workq_queue_up 0.
func CollectorTimeout(d time.Duration) CollectorOption {
	return func(c *QueueCollector) error {
		if d <= 0 {
			return option.Invalid("CollectorTimeout", d, "more than 0")
		}
		c.timeout = d
		return nil
	}
}

// NewQueueCollector returns a collector for the named queues, or for every workq
// queue on the server (discovered at each read) when queues is empty. The metrics,
// each labelled by queue:
//
//	workq_queue_jobs                    gauge  jobs in the queue: waiting, running or retrying
//	workq_queue_pending                 gauge  jobs not yet delivered to a worker
//	workq_queue_ack_pending             gauge  jobs delivered and not yet acknowledged (running, or awaiting a retry)
//	workq_queue_redelivered             gauge  of those, jobs delivered more than once
//	workq_queue_dead_letters            gauge  messages in the dead-letter stream
//	workq_queue_oldest_job_age_seconds  gauge  age of the oldest job in the queue, 0 when empty
//	workq_queue_scheduled               gauge  delayed jobs waiting for their time
//	workq_queue_schedules               gauge  periodic schedules, paused ones included
//	workq_queue_sequence_waiting        gauge  jobs waiting for the job before them in their sequence key
//	workq_queue_sequence_keys           gauge  sequence keys with such a job
//	workq_queue_sequence_oldest_waiting_seconds gauge  how long the longest of them has waited, 0 when none
//	workq_queue_up                      gauge  1 if the last read of the queue succeeded, else 0 (and no other series)
func NewQueueCollector(js jetstream.JetStream, queues []string, opts ...CollectorOption) (*QueueCollector, error) {
	if js == nil {
		return nil, fmt.Errorf("producer: queue collector: %w", option.Nil("JetStream"))
	}
	c := &QueueCollector{js: js, cacheFor: DefaultCollectorCache, timeout: DefaultCollectorTimeout}
	for _, q := range queues {
		n, err := queue.NamesFor(q)
		if err != nil {
			return nil, fmt.Errorf("producer: queue collector: %w", err)
		}
		c.queues = append(c.queues, n)
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return nil, fmt.Errorf("producer: queue collector: %w", err)
		}
	}
	return c, nil
}

var (
	descJobs        = queueDesc("workq_queue_jobs", "Jobs in the queue's stream: waiting, running or retrying.")
	descPending     = queueDesc("workq_queue_pending", "Jobs not yet delivered to a worker.")
	descAckPending  = queueDesc("workq_queue_ack_pending", "Jobs delivered to workers and not yet acknowledged: running, or waiting for a retry.")
	descRedelivered = queueDesc("workq_queue_redelivered", "Jobs delivered and not yet acknowledged that were delivered more than once.")
	descDead        = queueDesc("workq_queue_dead_letters", "Messages in the queue's dead-letter stream.")
	descOldest      = queueDesc("workq_queue_oldest_job_age_seconds", "Age of the oldest job in the queue's stream; 0 when it is empty.")
	descScheduled   = queueDesc("workq_queue_scheduled", "Delayed jobs waiting for their time.")
	descSchedules   = queueDesc("workq_queue_schedules", "Periodic schedules of the queue, paused ones included.")
	descSeqWaiting  = queueDesc("workq_queue_sequence_waiting", "Jobs waiting for the job before them in their sequence key (not halted ones).")
	descSeqKeys     = queueDesc("workq_queue_sequence_keys", "Sequence keys with a job waiting for the job before it.")
	descSeqOldest   = queueDesc("workq_queue_sequence_oldest_waiting_seconds", "How long the longest waiting job of a sequence has waited; 0 when none waits.")
	descPaused      = queueDesc("workq_queue_paused", "1 while the queue is paused (its workers get no jobs), else 0.")
	descUp          = queueDesc("workq_queue_up", "1 if the last read of the queue's state from the server succeeded, else 0.")
)

func queueDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"queue"}, nil)
}

// Describe implements prometheus.Collector.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descPending, descAckPending, descRedelivered, descDead, descOldest, descScheduled, descSchedules, descSeqWaiting, descSeqKeys, descSeqOldest, descPaused, descUp} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now()
	for _, s := range c.state() {
		if !s.ok {
			ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0, s.queue)
			continue
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1, s.queue)
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, s.jobs, s.queue)
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, s.pending, s.queue)
		ch <- prometheus.MustNewConstMetric(descAckPending, prometheus.GaugeValue, s.ackPending, s.queue)
		ch <- prometheus.MustNewConstMetric(descRedelivered, prometheus.GaugeValue, s.redelivered, s.queue)
		ch <- prometheus.MustNewConstMetric(descDead, prometheus.GaugeValue, s.dead, s.queue)
		ch <- prometheus.MustNewConstMetric(descScheduled, prometheus.GaugeValue, s.scheduled, s.queue)
		ch <- prometheus.MustNewConstMetric(descSchedules, prometheus.GaugeValue, s.schedules, s.queue)
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, s.paused, s.queue)
		age := 0.0
		if !s.oldest.IsZero() {
			age = max(0, now.Sub(s.oldest).Seconds()) // the server's clock stamped it
		}
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, age, s.queue)
		ch <- prometheus.MustNewConstMetric(descSeqWaiting, prometheus.GaugeValue, s.seqWaiting, s.queue)
		ch <- prometheus.MustNewConstMetric(descSeqKeys, prometheus.GaugeValue, s.seqKeys, s.queue)
		seqAge := 0.0
		if !s.seqOldest.IsZero() {
			seqAge = max(0, now.Sub(s.seqOldest).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(descSeqOldest, prometheus.GaugeValue, seqAge, s.queue)
	}
}

// state returns the cached samples, reading the server if they are too old. The
// lock is held during the read, so concurrent scrapes wait for one read.
func (c *QueueCollector) state() []queueSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.readAt.IsZero() && time.Since(c.readAt) < c.cacheFor {
		return c.samples
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	c.samples, c.readAt = c.readAll(ctx), time.Now()
	return c.samples
}

// readAll reads every queue, at most eight at a time, within ctx.
func (c *QueueCollector) readAll(ctx context.Context) []queueSample {
	type target struct {
		names  queue.Names
		stream *jetstream.StreamInfo // known already when discovered
	}
	var targets []target
	if c.queues != nil {
		for _, n := range c.queues {
			targets = append(targets, target{names: n})
		}
	} else {
		l := c.js.ListStreams(ctx, jetstream.WithStreamListSubject("workq.*.jobs"))
		for si := range l.Info() {
			q, ok := strings.CutPrefix(si.Config.Name, "WORKQ_")
			if !ok {
				continue
			}
			n, err := queue.NamesFor(q)
			if err != nil || n.Stream != si.Config.Name || !slices.Contains(si.Config.Subjects, n.JobsSubject) {
				continue
			}
			targets = append(targets, target{names: n, stream: si})
		}
		if l.Err() != nil {
			// Report the queues known from the last read as down.
			down := make([]queueSample, len(c.samples))
			for i, prev := range c.samples {
				down[i] = queueSample{queue: prev.queue}
			}
			return down
		}
	}
	out := make([]queueSample, len(targets))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = c.readQueue(ctx, t.names, t.stream)
		}()
	}
	wg.Wait()
	return out
}

// readQueue reads one queue's stream (si, if given, is its info as just listed),
// consumer and dead letters.
func (c *QueueCollector) readQueue(ctx context.Context, n queue.Names, si *jetstream.StreamInfo) queueSample {
	s := queueSample{queue: n.Queue}
	st, err := c.js.Stream(ctx, n.Stream)
	if err != nil {
		return s
	}
	if si == nil {
		si = st.CachedInfo()
	}
	ws, err := queue.ReadWorkers(ctx, st, n) // the consumers of every priority level; none before a worker ran
	if err != nil {
		return s
	}
	s.ackPending, s.redelivered = float64(ws.AckPending), float64(ws.Redelivered)
	if ws.Paused {
		s.paused = 1
	}
	census, err := queue.TakeCensus(ctx, st, n, si, ws)
	if err != nil {
		return s
	}
	// Jobs not delivered: on a level without a consumer yet, all of them.
	s.jobs, s.pending, s.scheduled, s.schedules, s.oldest = float64(census.Jobs), float64(census.Jobs-min(census.Jobs, uint64(ws.AckPending))),
		float64(census.Scheduled), float64(census.Schedules), census.Oldest
	dead, err := c.js.Stream(ctx, n.DeadStream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return s
	default:
		s.dead = float64(dead.CachedInfo().State.Msgs)
	}
	backlog, err := workflow.SequenceBacklog(ctx, record.Store{JS: c.js, Bucket: n.Bucket})
	if err != nil {
		return s
	}
	s.seqWaiting, s.seqKeys, s.seqOldest = float64(backlog.Jobs), float64(backlog.Keys), backlog.Oldest
	s.ok = true
	return s
}
