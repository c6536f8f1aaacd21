package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// flowRun is what a workflow test's handler saw of one run of a task.
type flowRun struct {
	token   uint64   // the run's fencing token: its claim's revision
	parents []string // Job.Parents
	failed  []string // Job.FailedParents
	payload []byte
}

// flowRecorder is a handler for workflow tests: each task's result is its name and
// its parents' results, "name(parent results…)"; it records every run.
type flowRecorder struct {
	mu   sync.Mutex
	runs map[string][]flowRun // by task name
	fail map[string]bool      // tasks whose handler fails for good
	hold chan struct{}        // when set, task "slow" waits for it (or its context)
}

func newFlowRecorder() *flowRecorder {
	return &flowRecorder{runs: map[string][]flowRun{}, fail: map[string]bool{}}
}

func (f *flowRecorder) Handle(ctx context.Context, j *consumer.Job) error {
	tok, err := j.FencingToken(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.runs[j.Task()] = append(f.runs[j.Task()], flowRun{token: tok, parents: j.Parents(), failed: j.FailedParents(), payload: j.Payload()})
	fail, hold := f.fail[j.Task()], f.hold
	f.mu.Unlock()
	if j.Task() == "slow" && hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return consumer.Permanent(errors.New("fails for good"))
	}
	var in []string
	for _, p := range j.Parents() {
		b, err := j.ParentResult(ctx, p)
		if errors.Is(err, consumer.ErrParentFailed) {
			in = append(in, p+"!")
			continue
		}
		if err != nil {
			return err
		}
		in = append(in, string(b))
	}
	j.SetResult([]byte(j.Task() + "(" + strings.Join(in, ",") + ")"))
	return nil
}

func (f *flowRecorder) ran(task string) []flowRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.runs[task])
}

// flowQueue starts a server and a producer of queue q, with workers of f (one per
// option set given; none when none are), and returns the producer and JetStream.
func flowQueue(t *testing.T, q string, f *flowRecorder, workers ...[]consumer.Option) (*producer.Producer, jetstream.JetStream) {
	t.Helper()
	js := testenv.Start(t).JetStream(t)
	p := newProducer(t, js, q)
	for _, opts := range workers {
		runWorker(t, newWorker(t, js, q, f, opts...))
	}
	return p, js
}

// enqueueFlow enqueues wf and returns its tasks' job ids.
func enqueueFlow(t *testing.T, p *producer.Producer, wf *producer.Workflow) []string {
	t.Helper()
	info, err := p.EnqueueWorkflow(testenv.Context(t, 60*time.Second), wf)
	if err != nil {
		t.Fatal(err)
	}
	return info.Tasks
}

// waitEnded waits until every job id has a terminal record and returns the records.
func waitEnded(t *testing.T, p *producer.Producer, ids []string) map[string]*producer.Record {
	t.Helper()
	out := map[string]*producer.Record{}
	deadline := time.Now().Add(60 * time.Second)
	for _, id := range ids {
		for {
			ctx := testenv.Context(t, 10*time.Second)
			r, err := p.Wait(ctx, id)
			if err == nil {
				out[id] = r
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s did not end: %v", id, err)
			}
		}
	}
	return out
}

// A diamond (a → b, c → d) beside a lone root e, on two workers: every task runs
// once; no task's claim comes before its last parent's commit, as the records'
// revisions say (one sequence for every record of the bucket); each reads its
// parents' results.
func TestWorkflowRunsAfterItsParentsCommit(t *testing.T) {
	t.Parallel()
	f := newFlowRecorder()
	four := []consumer.Option{consumer.Concurrency(4)}
	p, _ := flowQueue(t, "wf-diamond", f, four, four)
	wf := producer.NewWorkflow("order-42").
		Task("a", producer.Job{Payload: []byte("a")}).
		Task("b", producer.Job{}, producer.DependsOn("a")).
		Task("c", producer.Job{}, producer.DependsOn("a")).
		Task("d", producer.Job{}, producer.DependsOn("b", "c")).
		Task("e", producer.Job{})
	tasks := enqueueFlow(t, p, wf)
	if want := []string{"order-42.a", "order-42.b", "order-42.c", "order-42.d", "order-42.e"}; !slices.Equal(tasks, want) {
		t.Fatalf("tasks %v, want %v", tasks, want)
	}
	recs := waitEnded(t, p, tasks)
	for _, id := range tasks {
		r := recs[id]
		if r.State != producer.StateDone || r.Attempt != 1 || r.Workflow != "order-42" {
			t.Fatalf("%s: %+v, want done on attempt 1", id, r)
		}
		if runs := f.ran(r.Task); len(runs) != 1 {
			t.Fatalf("task %s ran %d times", r.Task, len(runs))
		}
		for _, parent := range r.Parents {
			pr := recs["order-42."+parent]
			if start := f.ran(r.Task)[0].token; start <= pr.Revision {
				t.Errorf("task %s claimed at revision %d, before its parent %s committed at %d", r.Task, start, parent, pr.Revision)
			}
		}
	}
	s, err := p.WaitWorkflow(testenv.Context(t, 30*time.Second), "order-42")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range s.Tasks {
		order = append(order, r.Task)
	}
	if s.State != producer.WorkflowDone || s.Counts[producer.StateDone] != 5 || !slices.Equal(order, []string{"a", "b", "c", "d", "e"}) {
		t.Errorf("WaitWorkflow: %s, %v, tasks %v", s.State, s.Counts, order)
	}
	if got, want := string(recs["order-42.d"].Result), "d(b(a()),c(a()))"; got != want {
		t.Errorf("d's result %q, want %q", got, want)
	}
	if got := recs["order-42.a"].Dependents; !slices.Equal(got, []string{"b", "c"}) {
		t.Errorf("a's dependents %v", got)
	}
}

// Before its parents end, a task waits: its record says which parents it waits for,
// and it has no message a worker could get.
func TestWorkflowTaskWaitsForItsParents(t *testing.T) {
	t.Parallel()
	const q = "wf-waiting"
	p, js := flowQueue(t, q, nil)
	ctx := testenv.Context(t, 30*time.Second)
	enqueueFlow(t, p, producer.NewWorkflow("w").Task("a", producer.Job{}).Task("b", producer.Job{}, producer.DependsOn("a")))
	b := status(t, p, "w.b")
	if b.State != producer.StateWaiting || !slices.Equal(b.WaitingFor, []string{"a"}) {
		t.Fatalf("b: %+v, want waiting for a", b)
	}
	if a := status(t, p, "w.a"); a.State != producer.StateQueued {
		t.Fatalf("a: %+v, want queued", a)
	}
	s, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetLastMsgForSubject(ctx, "workq."+q+".jobs.w.b"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("b has a job message before a ended: %v", err)
	}
	// Until they end, the tasks' records never expire: b may wait, and a may sit in
	// a backlog, longer than the bucket keeps records.
	ks, err := js.Stream(ctx, "KV_WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"w.a", "w.b"} {
		m, err := ks.GetLastMsgForSubject(ctx, "$KV.WORKQ_"+q+"_JOBS."+key)
		if err != nil {
			t.Fatal(err)
		}
		if ttl := m.Header.Get(jetstream.MsgTTLHeader); ttl != "never" {
			t.Errorf("%s's record has TTL %q, want never", key, ttl)
		}
	}
	// Enqueued again under the same id: refused, nothing changed.
	if _, err := p.EnqueueWorkflow(ctx, producer.NewWorkflow("w").Task("a", producer.Job{})); !errors.Is(err, producer.ErrWorkflowExists) {
		t.Fatalf("the same workflow id again: %v, want ErrWorkflowExists", err)
	}
	if b := status(t, p, "w.b"); b.State != producer.StateWaiting {
		t.Fatalf("b after a refused enqueue: %+v", b)
	}
}

// A task whose parent died is cancelled, and so are its own dependents; a task that
// runs if a parent failed runs, told which failed.
func TestWorkflowParentFailure(t *testing.T) {
	t.Parallel()
	f := newFlowRecorder()
	f.fail["a"] = true
	p, _ := flowQueue(t, "wf-failure", f, []consumer.Option{consumer.Concurrency(4)})
	wf := producer.NewWorkflow("f").
		Task("a", producer.Job{}).
		Task("ok", producer.Job{}).
		Task("b", producer.Job{}, producer.DependsOn("a", "ok")).
		Task("c", producer.Job{}, producer.DependsOn("ok", "a"), producer.RunIfParentFailed()).
		Task("d", producer.Job{}, producer.DependsOn("b"))
	recs := waitEnded(t, p, enqueueFlow(t, p, wf))
	for id, want := range map[string]producer.State{"f.a": producer.StateDead, "f.ok": producer.StateDone,
		"f.b": producer.StateCancelled, "f.c": producer.StateDone, "f.d": producer.StateCancelled} {
		if recs[id].State != want {
			t.Errorf("%s: %s, want %s (%+v)", id, recs[id].State, want, recs[id])
		}
	}
	if runs := f.ran("b"); len(runs) != 0 {
		t.Errorf("b ran %d times after its parent died", len(runs))
	}
	if runs := f.ran("d"); len(runs) != 0 {
		t.Errorf("d ran %d times after its parent was cancelled", len(runs))
	}
	if got, want := string(recs["f.c"].Result), "c(ok(),a!)"; got != want {
		t.Errorf("c's result %q, want %q", got, want)
	}
	if runs := f.ran("c"); len(runs) != 1 || !slices.Equal(runs[0].failed, []string{"a"}) {
		t.Errorf("c's runs %+v, want one told that a failed", runs)
	}
	if !strings.Contains(recs["f.b"].LastError, "parent task a") {
		t.Errorf("b's error %q does not say which parent failed", recs["f.b"].LastError)
	}
}

// Cancelling a running task cancels what waits for it, which never runs; cancelling
// a waiting task cancels it and its dependents. The queue ends empty: a task that
// waits has its message in its record only.
func TestWorkflowCancel(t *testing.T) {
	t.Parallel()
	const q = "wf-cancel"
	f := newFlowRecorder()
	f.hold = make(chan struct{}) // never closed: "slow" runs until cancelled
	p, js := flowQueue(t, q, f, []consumer.Option{consumer.AckWait(3 * time.Second)})
	ctx := testenv.Context(t, 60*time.Second)
	wf := producer.NewWorkflow("c").
		Task("slow", producer.Job{}).
		Task("next", producer.Job{}, producer.DependsOn("slow")).
		Task("root", producer.Job{}).
		Task("mid", producer.Job{}, producer.DependsOn("root", "slow")).
		Task("last", producer.Job{}, producer.DependsOn("mid"), producer.RunIfParentFailed())
	tasks := enqueueFlow(t, p, wf)
	for len(f.ran("slow")) == 0 || status(t, p, "c.root").State != producer.StateDone {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := p.Cancel(ctx, "c.mid"); err != nil { // waiting for slow
		t.Fatal(err)
	}
	if _, err := p.Cancel(ctx, "c.slow"); err != nil { // running
		t.Fatal(err)
	}
	recs := waitEnded(t, p, tasks)
	for id, want := range map[string]producer.State{"c.slow": producer.StateCancelled, "c.next": producer.StateCancelled,
		"c.root": producer.StateDone, "c.mid": producer.StateCancelled, "c.last": producer.StateDone} {
		if recs[id].State != want {
			t.Errorf("%s: %s, want %s", id, recs[id].State, want)
		}
	}
	for _, task := range []string{"next", "mid"} {
		if n := len(f.ran(task)); n != 0 {
			t.Errorf("%s ran %d times", task, n)
		}
	}
	s, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the jobs stream to empty", func() bool {
		si, err := s.Info(ctx)
		return err == nil && si.State.Msgs == 0
	})
}

// A worker that committed a task and died before telling its dependents leaves the
// task's message in the queue: the next delivery finds the record done and tells
// them. Here the commit is written as that worker would have, with no worker
// running, then a worker starts.
func TestWorkflowReleaseAfterCommitWithoutTelling(t *testing.T) {
	t.Parallel()
	const q = "wf-crash"
	p, js := flowQueue(t, q, nil)
	ctx := testenv.Context(t, 60*time.Second)
	tasks := enqueueFlow(t, p, producer.NewWorkflow("x").Task("a", producer.Job{}).Task("b", producer.Job{}, producer.DependsOn("a")))
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "x.a")
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	rec["state"], rec["attempt"], rec["result"] = "done", 1, []byte("from the dead worker")
	b, _ := json.Marshal(rec)
	if _, err := kv.Update(ctx, "x.a", b, e.Revision()); err != nil {
		t.Fatal(err)
	}
	f := newFlowRecorder()
	runWorker(t, newWorker(t, js, q, f))
	recs := waitEnded(t, p, tasks)
	if got := string(recs["x.b"].Result); got != "b(from the dead worker)" {
		t.Fatalf("b: %+v, result %q", recs["x.b"], got)
	}
	if n := len(f.ran("a")); n != 0 {
		t.Errorf("a ran %d times after its commit", n)
	}
}

// Many parents ending at once on several workers (a fan-in of 200), and one parent
// releasing many (a fan-out of 200): each task runs once, after all its parents
// committed.
func TestWorkflowFanOutFanIn(t *testing.T) {
	t.Parallel()
	f := newFlowRecorder()
	sixteen := []consumer.Option{consumer.Concurrency(16)}
	p, _ := flowQueue(t, "wf-fan", f, sixteen, sixteen, sixteen)
	const n = 200
	wf := producer.NewWorkflow("fan").Task("start", producer.Job{})
	mids := make([]string, n)
	for i := range mids {
		mids[i] = fmt.Sprintf("m%d", i)
		wf.Task(mids[i], producer.Job{}, producer.DependsOn("start"))
	}
	wf.Task("end", producer.Job{}, producer.DependsOn(mids...))
	tasks := enqueueFlow(t, p, wf)
	recs := waitEnded(t, p, tasks)
	var lastCommit uint64
	for _, id := range tasks {
		r := recs[id]
		if r.State != producer.StateDone {
			t.Fatalf("%s: %+v", id, r)
		}
		if runs := f.ran(r.Task); len(runs) != 1 {
			t.Fatalf("%s ran %d times", r.Task, len(runs))
		}
		if r.Task != "end" {
			lastCommit = max(lastCommit, r.Revision)
		}
	}
	if end := f.ran("end")[0].token; end <= lastCommit {
		t.Fatalf("end claimed at revision %d, before the last of its parents committed (%d)", end, lastCommit)
	}
	if got := string(recs["fan.end"].Result); strings.Count(got, "(start())") != n {
		t.Fatalf("end's result has %d parent results, want %d", strings.Count(got, "(start())"), n)
	}
}

// Workflows the producer refuses, before it writes anything.
func TestWorkflowInvalid(t *testing.T) {
	t.Parallel()
	p, _ := flowQueue(t, "wf-invalid", nil)
	ctx := testenv.Context(t, 30*time.Second)
	// A waiting task keeps its message in its record (base64): a payload a plain job
	// may have does not fit there. A root with more dependents than its record holds.
	big := producer.Job{Payload: make([]byte, 900<<10)}
	if _, err := p.Enqueue(ctx, big.Payload); err != nil {
		t.Fatalf("the payload as a plain job: %v", err)
	}
	wide := producer.NewWorkflow("w").Task("a", producer.Job{})
	for i := range 20000 {
		wide.Task(fmt.Sprintf("%060d", i), producer.Job{}, producer.DependsOn("a"))
	}
	for name, wf := range map[string]*producer.Workflow{
		"large waiting task":  producer.NewWorkflow("w").Task("a", producer.Job{}).Task("b", big, producer.DependsOn("a")),
		"too many dependents": wide,
		"empty":               producer.NewWorkflow("w"),
		"cycle":               producer.NewWorkflow("w").Task("a", producer.Job{}, producer.DependsOn("c")).Task("b", producer.Job{}, producer.DependsOn("a")).Task("c", producer.Job{}, producer.DependsOn("b")),
		"self":                producer.NewWorkflow("w").Task("a", producer.Job{}, producer.DependsOn("a")),
		"unknown":             producer.NewWorkflow("w").Task("a", producer.Job{}, producer.DependsOn("nope")),
		"duplicate":           producer.NewWorkflow("w").Task("a", producer.Job{}).Task("a", producer.Job{}),
		"parent twice":        producer.NewWorkflow("w").Task("a", producer.Job{}).Task("b", producer.Job{}, producer.DependsOn("a", "a")),
		"bad task name":       producer.NewWorkflow("w").Task("a.b", producer.Job{}),
		"bad id":              producer.NewWorkflow("w.x").Task("a", producer.Job{}),
		"job id":              producer.NewWorkflow("w").Task("a", producer.Job{ID: "mine"}),
		"delayed":             producer.NewWorkflow("w").Task("a", producer.Job{At: time.Now().Add(time.Hour)}),
		"unique":              producer.NewWorkflow("w").Task("a", producer.Job{Unique: "k"}),
	} {
		if _, err := p.EnqueueWorkflow(ctx, wf); !errors.Is(err, producer.ErrInvalidWorkflow) {
			t.Errorf("%s: %v, want ErrInvalidWorkflow", name, err)
		}
	}
	if _, err := p.Status(ctx, "w.a"); !errors.Is(err, producer.ErrNotFound) {
		t.Errorf("a refused workflow left a record: %v", err)
	}
}

// A workflow's state while it runs, cancelled as a whole, and waited for: the wait
// returns when the cancel has ended every task.
func TestWorkflowStatusCancelAndWait(t *testing.T) {
	t.Parallel()
	f := newFlowRecorder()
	f.hold = make(chan struct{})
	p, _ := flowQueue(t, "wf-status", f, []consumer.Option{consumer.AckWait(3 * time.Second)})
	ctx := testenv.Context(t, 60*time.Second)
	enqueueFlow(t, p, producer.NewWorkflow("s").
		Task("first", producer.Job{}).
		Task("slow", producer.Job{}, producer.DependsOn("first")).
		Task("after", producer.Job{}, producer.DependsOn("slow")))
	for len(f.ran("slow")) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	s, err := p.Workflow(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if s.State != producer.WorkflowRunning || s.Task("first").State != producer.StateDone || s.Task("after").State != producer.StateWaiting {
		t.Fatalf("running workflow: %s, %v", s.State, s.Counts)
	}
	waited := make(chan *producer.WorkflowStatus, 1)
	go func() {
		s, err := p.WaitWorkflow(ctx, "s")
		if err != nil {
			t.Error(err)
		}
		waited <- s
	}()
	if _, err := p.CancelWorkflow(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	s = <-waited
	if s == nil || s.State != producer.WorkflowFailed || s.Counts[producer.StateCancelled] != 2 || s.FinishedAt.IsZero() {
		t.Fatalf("after the cancel: %+v", s)
	}
	if n := len(f.ran("after")); n != 0 {
		t.Fatalf("after ran %d times", n)
	}
	list, err := p.Workflows(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "s" || list[0].State != producer.WorkflowFailed || list[0].Tasks != 3 {
		t.Fatalf("Workflows: %+v, %v", list, err)
	}
	if _, err := p.Workflow(ctx, "nope"); !errors.Is(err, producer.ErrNotFound) {
		t.Fatalf("unknown workflow: %v", err)
	}
}

// A running task adds tasks to its workflow with its commit: they start after it, and
// its dependent waits for them too. A run that fails adds nothing: only what the
// committing run added is there.
func TestWorkflowTaskAddsTasks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	runs := map[string]uint64{} // task → fencing token of its last run
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		tok, err := j.FencingToken(ctx)
		if err != nil {
			return err
		}
		mu.Lock()
		runs[j.Task()] = tok
		mu.Unlock()
		switch j.Task() {
		case "split":
			var parts []consumer.NewTask
			for i := range 30 {
				parts = append(parts, consumer.NewTask{Name: fmt.Sprintf("a%d-part%d", j.Attempt(), i), Payload: []byte(fmt.Sprint(i))})
			}
			parts = append(parts, consumer.NewTask{Name: fmt.Sprintf("a%d-sum", j.Attempt()), DependsOn: []string{parts[0].Name, parts[1].Name}})
			if err := j.AddTasks(parts...); err != nil {
				return err
			}
			if j.Attempt() == 1 {
				return errors.New("the first run fails after adding its tasks")
			}
		case "join":
			j.SetResult([]byte(fmt.Sprint(len(j.Parents()))))
		}
		return nil
	})
	js := testenv.Start(t).JetStream(t)
	const q = "wf-add"
	p := newProducer(t, js, q)
	runWorker(t, newWorker(t, js, q, h, consumer.Concurrency(8), consumer.Backoff(func(int) time.Duration { return 10 * time.Millisecond })))
	ctx := testenv.Context(t, 60*time.Second)
	enqueueFlow(t, p, producer.NewWorkflow("add").Task("split", producer.Job{}).Task("join", producer.Job{}, producer.DependsOn("split")))
	if _, err := p.Wait(ctx, "add.join"); err != nil {
		t.Fatal(err)
	}
	s, err := p.WaitWorkflow(ctx, "add")
	if err != nil {
		t.Fatal(err)
	}
	if s.State != producer.WorkflowDone || len(s.Tasks) != 2+31 {
		t.Fatalf("workflow %s with %d tasks (%v), want done with 33", s.State, len(s.Tasks), s.Counts)
	}
	if s.Task("a1-part0") != nil {
		t.Fatal("the failed run's tasks were added")
	}
	join := s.Task("join")
	if string(join.Result) != "32" { // split and the 31 tasks its second run added
		t.Fatalf("join ran with %s parents, want 32", join.Result)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range s.Tasks {
		for _, parent := range r.Parents {
			if pr := s.Task(parent); runs[r.Task] <= pr.Revision {
				t.Errorf("%s ran at revision %d, before its parent %s committed at %d", r.Task, runs[r.Task], parent, pr.Revision)
			}
		}
	}
	if sum := s.Task("a2-sum"); !slices.Equal(sum.Parents, []string{"split", "a2-part0", "a2-part1"}) {
		t.Errorf("a2-sum's parents %v", sum.Parents)
	}
}

// A task may add only tasks whose names are new in the workflow: one that exists
// fails the commit for good. A task whose record cannot hold its message is refused
// at once.
func TestWorkflowAddedTaskNameExists(t *testing.T) {
	t.Parallel()
	h := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		if j.Task() == "b" {
			if err := j.AddTasks(consumer.NewTask{Name: "b"}); !errors.Is(err, consumer.ErrAddTasks) {
				return fmt.Errorf("adding itself: %v", err)
			}
			if err := j.AddTasks(consumer.NewTask{Name: "huge", Payload: make([]byte, 900<<10)}); !errors.Is(err, consumer.ErrAddTasks) {
				return fmt.Errorf("adding a task too large for its record: %v", err)
			}
			return j.AddTasks(consumer.NewTask{Name: "other"})
		}
		return nil
	})
	js := testenv.Start(t).JetStream(t)
	const q = "wf-add-exists"
	p := newProducer(t, js, q)
	runWorker(t, newWorker(t, js, q, h))
	ctx := testenv.Context(t, 60*time.Second)
	enqueueFlow(t, p, producer.NewWorkflow("x").Task("a", producer.Job{}).Task("b", producer.Job{}, producer.DependsOn("a")).
		Task("other", producer.Job{}, producer.DependsOn("a")))
	b, err := p.Wait(ctx, "x.b")
	if err != nil {
		t.Fatal(err)
	}
	if b.State != producer.StateDead || !strings.Contains(b.LastError, "exists") {
		t.Fatalf("b: %s, %q; want dead, saying the task exists", b.State, b.LastError)
	}
	if other := status(t, p, "x.other"); !slices.Equal(other.Parents, []string{"a"}) {
		t.Fatalf("other: %+v", other)
	}
}

// A workflow read while its tasks' records are being written has every task: reads
// of 4-task diamonds taken while they run never miss one, and a wait never returns
// before every task ended.
func TestWorkflowReadDuringWrites(t *testing.T) {
	t.Parallel()
	slow := consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		time.Sleep(3 * time.Millisecond)
		return nil
	})
	js := testenv.Start(t).JetStream(t)
	const q = "wf-reads"
	p := newProducer(t, js, q)
	for range 2 {
		runWorker(t, newWorker(t, js, q, slow, consumer.Concurrency(8), consumer.AckWait(time.Second)))
	}
	ctx := testenv.Context(t, 90*time.Second)
	const n = 40
	for i := range n {
		id := fmt.Sprintf("d%d", i)
		enqueueFlow(t, p, producer.NewWorkflow(id).
			Task("a", producer.Job{}).
			Task("b", producer.Job{}, producer.DependsOn("a")).
			Task("c", producer.Job{}, producer.DependsOn("a")).
			Task("d", producer.Job{}, producer.DependsOn("b", "c")))
		waited := make(chan *producer.WorkflowStatus, 1)
		go func() {
			s, err := p.WaitWorkflow(ctx, id)
			if err != nil {
				t.Error(err)
			}
			waited <- s
		}()
		for {
			s, err := p.Workflow(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Tasks) != 4 {
				t.Fatalf("workflow %s read with %d tasks (%v), want 4", id, len(s.Tasks), s.Counts)
			}
			if s.State != producer.WorkflowRunning {
				break
			}
		}
		if s := <-waited; s == nil || len(s.Tasks) != 4 || s.Counts[producer.StateDone] != 4 {
			t.Fatalf("WaitWorkflow(%s) returned %+v", id, s)
		}
	}
}

// A batch: its jobs run independently, its completion job once all have ended; with
// runIfFailed it runs after a failed one too, told which.
func TestWorkflowBatch(t *testing.T) {
	t.Parallel()
	f := newFlowRecorder()
	f.fail["job-3"] = true
	p, _ := flowQueue(t, "wf-batch", f, []consumer.Option{consumer.Concurrency(4)})
	ctx := testenv.Context(t, 60*time.Second)
	jobs := make([]producer.Job, 5)
	for i := range jobs {
		jobs[i] = producer.Job{Payload: []byte(fmt.Sprint(i))}
	}
	enqueueFlow(t, p, producer.Batch("ok", jobs[:3], producer.Job{}, false))
	enqueueFlow(t, p, producer.Batch("partial", jobs, producer.Job{}, true))
	ok, err := p.WaitWorkflow(ctx, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if then := ok.Task("then"); ok.State != producer.WorkflowDone || string(then.Result) != "then(job-0(),job-1(),job-2())" {
		t.Fatalf("batch ok: %s, then's result %q", ok.State, then.Result)
	}
	partial, err := p.WaitWorkflow(ctx, "partial")
	if err != nil {
		t.Fatal(err)
	}
	then := partial.Task("then")
	if partial.State != producer.WorkflowFailed || then.State != producer.StateDone || !slices.Equal(then.FailedParents, []string{"job-3"}) ||
		string(then.Result) != "then(job-0(),job-1(),job-2(),job-3!,job-4())" {
		t.Fatalf("batch partial: %s; then %s, failed parents %v, result %q", partial.State, then.State, then.FailedParents, then.Result)
	}
}

// A worker that committed a task and wrote its dependent's release (queued), but died
// before it published the dependent's message: the task's message comes back after
// AckWait, and its telling, finding the dependent released and never claimed,
// publishes the message kept in the dependent's record. The dependent runs once and
// the queue ends empty.
func TestWorkflowReleaseFinishedAfterInterruptedRelease(t *testing.T) {
	t.Parallel()
	const q = "wf-release-cut"
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	p := newProducer(t, js, q)
	if _, err := p.EnqueueWorkflow(ctx, producer.NewWorkflow("x").Task("a", producer.Job{}).Task("b", producer.Job{Payload: []byte("b's payload")}, producer.DependsOn("a"))); err != nil {
		t.Fatal(err)
	}
	f := newFlowRecorder()
	w := newWorker(t, js, q, f, consumer.AckWait(time.Second))

	// The worker that dies: it has a's delivery (never acked) ...
	cons, err := js.Consumer(ctx, "WORKQ_"+q, "workers")
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		if m.Subject() != "workq."+q+".jobs.x.a" {
			t.Fatalf("fetched %s", m.Subject())
		}
	}
	// ... commits a, writes b's release (its last parent ended: queued), and dies
	// before it publishes b's message.
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	set := func(key string, change func(map[string]any)) {
		e, err := kv.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			t.Fatal(err)
		}
		change(rec)
		b, _ := json.Marshal(rec)
		if _, err := kv.Update(ctx, key, b, e.Revision()); err != nil {
			t.Fatal(err)
		}
	}
	set("x.a", func(r map[string]any) { r["state"], r["attempt"], r["result"] = "done", 1, []byte("a's result") })
	set("x.b", func(r map[string]any) {
		if r["message"] == nil {
			t.Fatalf("b waits with no message in its record: %v", r)
		}
		r["state"] = "queued"
		delete(r, "waiting_for")
	})

	// A live worker: a comes back after AckWait, tells b again, which runs.
	runWorker(t, w)
	recs := waitEnded(t, p, []string{"x.a", "x.b"})
	if recs["x.b"].State != producer.StateDone || recs["x.b"].Attempt != 1 {
		t.Fatalf("b: %+v", recs["x.b"])
	}
	if runs := f.ran("b"); len(runs) != 1 || string(runs[0].payload) != "b's payload" {
		t.Fatalf("b's runs: %+v", runs)
	}
	s, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 20*time.Second, "the jobs stream to empty", func() bool {
		si, err := s.Info(ctx)
		return err == nil && si.State.Msgs == 0
	})
}
