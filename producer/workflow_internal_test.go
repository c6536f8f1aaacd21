package producer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/testenv"
)

// A workflow's enqueue that fails in the middle leaves nothing behind: failing among
// the records, no record or job message of it is left; failing among the roots' messages, every task is cancelled and no job
// message is left for a worker.
func TestEnqueueWorkflowAllOrNothing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		step      string
		at        int
		cancelled bool // the tasks are left cancelled (else removed)
	}{
		{step: "record", at: 700},
		{step: "record", at: 300},
		{step: "root", at: 250, cancelled: true},
	} {
		t.Run(fmt.Sprintf("%s-%d", c.step, c.at), func(t *testing.T) {
			t.Parallel()
			env := testenv.Start(t)
			js := env.JetStream(t)
			q := fmt.Sprintf("wf-partial-%s-%d", c.step, c.at)
			ctx := testenv.Context(t, 60*time.Second)
			p, err := New(ctx, js, q)
			if err != nil {
				t.Fatal(err)
			}
			injected := errors.New("injected failure")
			p.workflowStep = func(step string, n int) error {
				if step == c.step && n == c.at {
					return injected
				}
				return nil
			}
			// 500 roots and 500 tasks that wait for one of them each.
			wf := NewWorkflow("big")
			for i := range 500 {
				wf.Task(fmt.Sprintf("r%d", i), Job{Payload: []byte("x")})
				wf.Task(fmt.Sprintf("w%d", i), Job{Payload: []byte("y")}, DependsOn(fmt.Sprintf("r%d", i)))
			}
			if _, err := p.EnqueueWorkflow(ctx, wf); !errors.Is(err, injected) {
				t.Fatalf("EnqueueWorkflow: %v, want the injected failure", err)
			}
			kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
			if err != nil {
				t.Fatal(err)
			}
			keys, err := kv.ListKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for k := range keys.Keys() {
				n++
				if !c.cancelled {
					t.Errorf("record %s left", k)
					continue
				}
				r, err := p.Status(ctx, k)
				if err != nil || r.State != StateCancelled {
					t.Errorf("task %s: %+v, %v; want cancelled", k, r, err)
				}
			}
			if c.cancelled && n != 1000 {
				t.Errorf("%d records, want the 1000 tasks cancelled", n)
			}
			s, err := js.Stream(ctx, "WORKQ_"+q)
			if err != nil {
				t.Fatal(err)
			}
			si, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
			if err != nil {
				t.Fatal(err)
			}
			if len(si.State.Subjects) != 0 {
				t.Errorf("%d messages left in the jobs stream on %d subjects", si.State.Msgs, len(si.State.Subjects))
			}
			if c.cancelled {
				return
			}
			// Enqueued again under the same id, over the removed records' markers:
			// stored, and its waiting tasks still never expire.
			p.workflowStep = nil
			if _, err := p.EnqueueWorkflow(ctx, wf); err != nil {
				t.Fatalf("enqueue again: %v", err)
			}
			ks, err := js.Stream(ctx, "KV_WORKQ_"+q+"_JOBS")
			if err != nil {
				t.Fatal(err)
			}
			m, err := ks.GetLastMsgForSubject(ctx, "$KV.WORKQ_"+q+"_JOBS.big.w0")
			if err != nil {
				t.Fatal(err)
			}
			if ttl := m.Header.Get(jetstream.MsgTTLHeader); ttl != "never" {
				t.Errorf("a waiting task written over a removed record has TTL %q, want never", ttl)
			}
		})
	}
}

// The context given to the writes of EnqueueWorkflow ends them: a caller that gives
// up gets its context's error and nothing stays behind.
func TestEnqueueWorkflowContextEnds(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	p, err := New(ctx, js, "wf-ctx")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	p.workflowStep = func(step string, n int) error {
		if step == "record" && n == 10 {
			cancel()
		}
		return nil
	}
	wf := NewWorkflow("w")
	for i := range 100 {
		wf.Task(fmt.Sprintf("r%d", i), Job{})
		wf.Task(fmt.Sprintf("w%d", i), Job{}, DependsOn(fmt.Sprintf("r%d", i)))
	}
	if _, err := p.EnqueueWorkflow(wctx, wf); !errors.Is(err, context.Canceled) {
		t.Fatalf("EnqueueWorkflow: %v, want context.Canceled", err)
	}
	if _, err := p.Status(ctx, "w.r0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("w.r0 after a cancelled enqueue: %v, want ErrNotFound", err)
	}
}

// parentsFirst places every task after its parents and, among those whose parents are
// placed, by name.
func TestParentsFirst(t *testing.T) {
	t.Parallel()
	task := func(name string, parents, dependents []string) *Record {
		return &Record{Task: name, Parents: parents, Dependents: dependents}
	}
	tasks := []*Record{
		task("y", []string{"z"}, nil),
		task("d", []string{"c", "b"}, nil),
		task("c", []string{"a"}, []string{"d"}),
		task("z", nil, []string{"y"}),
		task("b", []string{"a"}, []string{"d"}),
		task("e", nil, nil),
		task("a", nil, []string{"c", "b"}),
	}
	var got []string
	for _, r := range parentsFirst(tasks) {
		got = append(got, r.Task)
	}
	if want := []string{"a", "b", "c", "d", "e", "z", "y"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
