package queue

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/testenv"
)

func mustNames(t *testing.T, q string) Names {
	t.Helper()
	n, err := NamesFor(q)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantIncompatible fails unless err is ErrIncompatible and its message holds every
// one of parts (the object's name, the field, what exists, what was asked).
func wantIncompatible(t *testing.T, err error, parts ...string) {
	t.Helper()
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("err = %v, want ErrIncompatible", err)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error does not mention %q: %v", p, err)
		}
	}
}

func TestProvisionIsIdempotent(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	n := mustNames(t, "idem")

	// Several processes provisioning the same queue at once all succeed.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Provision(testenv.Context(t, 20*time.Second), js, n, Config{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Provision %d: %v", i, err)
		}
	}
	// And again, with the options that created it spelled out.
	o, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{Replicas: 1, RecordTTL: DefaultRecordTTL, Duplicates: DefaultDuplicates})
	if err != nil {
		t.Fatalf("second Provision: %v", err)
	}
	if o.Stream.CachedInfo().Config.Name != n.Stream || o.Dead.CachedInfo().Config.Name != n.DeadStream || o.Records.Bucket() != n.Bucket {
		t.Fatalf("objects = %s, %s, %s", o.Stream.CachedInfo().Config.Name, o.Dead.CachedInfo().Config.Name, o.Records.Bucket())
	}
	want := ConsumerConfig(n, 30*time.Second, 100, 1)
	for i := range 2 {
		if _, err := EnsureConsumer(testenv.Context(t, 10*time.Second), o.Stream, want); err != nil {
			t.Fatalf("EnsureConsumer %d: %v", i, err)
		}
	}
	names := o.Stream.ListConsumers(testenv.Context(t, 5*time.Second))
	var count int
	for range names.Info() {
		count++
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	if count != 1 {
		t.Fatalf("%d consumers, want 1", count)
	}
}

func TestProvisionAcceptsCompatibleObjects(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	n := mustNames(t, "compat")

	// A bucket an operator created with another record TTL: callers that do not ask
	// for a TTL take it as it is.
	if _, err := js.CreateKeyValue(testenv.Context(t, 5*time.Second), jetstream.KeyValueConfig{Bucket: n.Bucket, History: 1, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	// A dead-letter stream with limits of its own and an extra subject.
	if _, err := js.CreateStream(testenv.Context(t, 5*time.Second), jetstream.StreamConfig{
		Name: n.DeadStream, Subjects: []string{n.DeadSubject, "ops.dead"}, MaxAge: 7 * 24 * time.Hour,
	}); err != nil {
		t.Fatal(err)
	}
	o, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{})
	if err != nil {
		t.Fatalf("Provision over compatible objects: %v", err)
	}
	st, err := o.Records.Status(testenv.Context(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != time.Hour {
		t.Fatalf("bucket TTL = %s, want the existing 1h kept", st.TTL())
	}
	// Objects created without atomic batch publishes (the operator's bucket, or any
	// queue from before group commit) get them, and Provision says so.
	bs := st.(*jetstream.KeyValueBucketStatus)
	if !o.AtomicJobs || !o.AtomicRecords || !bs.StreamInfo().Config.AllowAtomicPublish {
		t.Fatalf("atomic publishes: jobs %v, records %v (bucket stream allow_atomic %v); want all on",
			o.AtomicJobs, o.AtomicRecords, bs.StreamInfo().Config.AllowAtomicPublish)
	}
	// Explicitly asking for what exists is fine too.
	if _, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{Replicas: 1, RecordTTL: time.Hour}); err != nil {
		t.Fatalf("Provision asking for the existing TTL: %v", err)
	}

	// A workers consumer with another MaxAckPending and its filters in another order.
	want := ConsumerConfig(n, 30*time.Second, 100, 1)
	other := want
	other.MaxAckPending = 7
	other.FilterSubjects = []string{want.FilterSubjects[1], want.FilterSubjects[0]}
	if _, err := o.Stream.CreateConsumer(testenv.Context(t, 5*time.Second), other); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureConsumer(testenv.Context(t, 10*time.Second), o.Stream, want); err != nil {
		t.Fatalf("EnsureConsumer over a compatible consumer: %v", err)
	}
}

func TestProvisionRefusesIncompatibleBucket(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)

	bucket := func(t *testing.T, n Names, cfg jetstream.KeyValueConfig) {
		t.Helper()
		cfg.Bucket = n.Bucket
		if _, err := js.CreateKeyValue(testenv.Context(t, 5*time.Second), cfg); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("history", func(t *testing.T) {
		n := mustNames(t, "hist")
		bucket(t, n, jetstream.KeyValueConfig{History: 5, TTL: DefaultRecordTTL})
		_, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{})
		wantIncompatible(t, err, "bucket WORKQ_hist_JOBS", "history 5, want 1")
	})
	t.Run("ttl asked", func(t *testing.T) {
		n := mustNames(t, "ttl")
		bucket(t, n, jetstream.KeyValueConfig{History: 1, TTL: time.Hour})
		_, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{RecordTTL: 2 * time.Hour})
		wantIncompatible(t, err, "bucket WORKQ_ttl_JOBS", "TTL 1h0m0s, want 2h0m0s")
	})
	t.Run("no ttl, one asked", func(t *testing.T) {
		n := mustNames(t, "nottl")
		bucket(t, n, jetstream.KeyValueConfig{History: 1})
		_, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{RecordTTL: time.Hour})
		wantIncompatible(t, err, "bucket WORKQ_nottl_JOBS", "TTL none, want 1h0m0s")
	})
	t.Run("file storage, memory asked", func(t *testing.T) {
		n := mustNames(t, "stor")
		bucket(t, n, jetstream.KeyValueConfig{History: 1, Storage: jetstream.FileStorage})
		_, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{Memory: true})
		wantIncompatible(t, err, "bucket WORKQ_stor_JOBS", "File storage, want memory")
	})
	t.Run("replicas", func(t *testing.T) {
		// On one server only the bucket can be checked for R3 on its own: Provision
		// would refuse the R1 streams first.
		n := mustNames(t, "repl")
		bucket(t, n, jetstream.KeyValueConfig{History: 1, Replicas: 1})
		_, _, err := ensureBucket(testenv.Context(t, 10*time.Second), js, jetstream.KeyValueConfig{Bucket: n.Bucket, History: 1}, Config{Replicas: 3})
		wantIncompatible(t, err, "bucket WORKQ_repl_JOBS", "1 replicas, want 3")
	})
	t.Run("not a bucket", func(t *testing.T) {
		n := mustNames(t, "nokv")
		if _, err := js.CreateStream(testenv.Context(t, 5*time.Second), jetstream.StreamConfig{Name: "KV_" + n.Bucket, Subjects: []string{"nokv.>"}}); err != nil {
			t.Fatal(err)
		}
		_, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{})
		wantIncompatible(t, err, "bucket WORKQ_nokv_JOBS", "not a key-value bucket")
	})
	t.Run("subjects", func(t *testing.T) {
		n := mustNames(t, "subj")
		if _, err := js.CreateStream(testenv.Context(t, 5*time.Second), jetstream.StreamConfig{
			Name: "KV_" + n.Bucket, Subjects: []string{"subj.>"}, MaxMsgsPerSubject: 1,
		}); err != nil {
			t.Fatal(err)
		}
		_, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{})
		wantIncompatible(t, err, "bucket WORKQ_subj_JOBS", "lack $KV.WORKQ_subj_JOBS.>")
	})
}

func TestProvisionRefusesIncompatibleDeadStream(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	dead := func(t *testing.T, n Names, cfg jetstream.StreamConfig) {
		t.Helper()
		cfg.Name = n.DeadStream
		if _, err := js.CreateStream(testenv.Context(t, 5*time.Second), cfg); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("retention", func(t *testing.T) {
		n := mustNames(t, "dret")
		dead(t, n, jetstream.StreamConfig{Subjects: []string{n.DeadSubject}, Retention: jetstream.WorkQueuePolicy})
		_, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{})
		wantIncompatible(t, err, "stream WORKQ_dret_DEAD", "retention WorkQueue, want Limits")
	})
	t.Run("subjects", func(t *testing.T) {
		n := mustNames(t, "dsub")
		dead(t, n, jetstream.StreamConfig{Subjects: []string{"elsewhere"}})
		_, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{})
		wantIncompatible(t, err, "stream WORKQ_dsub_DEAD", "lack workq.dsub.dead")
	})
	t.Run("file storage, memory asked", func(t *testing.T) {
		n := mustNames(t, "dsto")
		dead(t, n, jetstream.StreamConfig{Subjects: []string{n.DeadSubject}, Storage: jetstream.FileStorage})
		_, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{Memory: true})
		wantIncompatible(t, err, "stream WORKQ_dsto_DEAD", "File storage, want memory")
	})
}

func TestEnsureConsumerRefusesIncompatible(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	const ackWait = 30 * time.Second

	cases := map[string]struct {
		edit  func(c *jetstream.ConsumerConfig)
		parts []string
	}{
		"max deliver": {func(c *jetstream.ConsumerConfig) { c.MaxDeliver = 5 }, []string{"MaxDeliver 5, want unlimited", "delete the consumer"}},
		// The fix for an AckWait is the queue's setting, not a deleted consumer.
		"ack wait": {func(c *jetstream.ConsumerConfig) { c.AckWait = time.Minute }, []string{"AckWait 1m0s, this worker wants 30s",
			"run the worker with AckWait 1m0s, or change the queue's with admin.SetAckWait (workq queue set <queue> --ack-wait)"}},
		"filter": {func(c *jetstream.ConsumerConfig) { c.FilterSubjects = nil; c.FilterSubject = "workq.cfilter.jobs" },
			[]string{"filters [workq.cfilter.jobs], want [workq.cfilter.jobs workq.cfilter.jobs.>]"}},
		"backoff":      {func(c *jetstream.ConsumerConfig) { c.BackOff = []time.Duration{ackWait, 2 * ackWait} }, []string{"BackOff [30s 1m0s], want none"}},
		"headers only": {func(c *jetstream.ConsumerConfig) { c.HeadersOnly = true }, []string{"headers only"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := "c" + strings.ReplaceAll(name, " ", "")
			n := mustNames(t, q)
			o, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{})
			if err != nil {
				t.Fatal(err)
			}
			want := ConsumerConfig(n, ackWait, 100, 1)
			existing := want
			tc.edit(&existing)
			if _, err := o.Stream.CreateConsumer(testenv.Context(t, 5*time.Second), existing); err != nil {
				t.Fatal(err)
			}
			_, err = EnsureConsumer(testenv.Context(t, 10*time.Second), o.Stream, want)
			wantIncompatible(t, err, append([]string{"consumer workers of stream WORKQ_" + q}, tc.parts...)...)
		})
	}

	t.Run("push consumer", func(t *testing.T) {
		n := mustNames(t, "cpush")
		o, err := Provision(testenv.Context(t, 10*time.Second), js, n, Config{})
		if err != nil {
			t.Fatal(err)
		}
		push := ConsumerConfig(n, ackWait, 100, 1)
		push.DeliverSubject = "deliver.cpush"
		if _, err := o.Stream.CreatePushConsumer(testenv.Context(t, 5*time.Second), push); err != nil {
			t.Fatal(err)
		}
		_, err = EnsureConsumer(testenv.Context(t, 10*time.Second), o.Stream, ConsumerConfig(n, ackWait, 100, 1))
		wantIncompatible(t, err, "consumer workers of stream WORKQ_cpush", "push consumer")
	})

	t.Run("ack policy", func(t *testing.T) {
		// A WorkQueue stream refuses consumers without explicit acks, so an existing
		// stream of another retention stands in for a queue that was set up by hand.
		n := mustNames(t, "cack")
		s, err := js.CreateStream(testenv.Context(t, 5*time.Second), jetstream.StreamConfig{Name: n.Stream, Subjects: n.JobsFilter()})
		if err != nil {
			t.Fatal(err)
		}
		want := ConsumerConfig(n, ackWait, 100, 1)
		existing := want
		existing.AckPolicy = jetstream.AckNonePolicy
		if _, err := s.CreateConsumer(testenv.Context(t, 5*time.Second), existing); err != nil {
			t.Fatal(err)
		}
		_, err = EnsureConsumer(testenv.Context(t, 10*time.Second), s, want)
		wantIncompatible(t, err, "consumer workers of stream WORKQ_cack", "ack policy AckNone, want AckExplicit")
	})
}

func TestFiltersAndSameSet(t *testing.T) {
	t.Parallel()
	one := jetstream.ConsumerConfig{FilterSubject: "a"}
	many := jetstream.ConsumerConfig{FilterSubjects: []string{"a", "b"}}
	if got := filters(one); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("filters(single) = %v", got)
	}
	if !sameSet(filters(many), []string{"b", "a"}) || sameSet(filters(many), []string{"a"}) || sameSet([]string{"a", "a"}, []string{"a", "b"}) {
		t.Fatal("sameSet")
	}
}
