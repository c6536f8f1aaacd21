//go:build chaos

package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/internal/workflow"
	"github.com/workq/workq/producer"
)

// A workflow of layers of tasks, each depending on one to three tasks of earlier
// layers (chains through every layer, diamonds, fan-outs from the first layers) and a
// last task depending on the whole last layer (a fan-in), runs on worker processes
// (this test binary as a Go worker: workerproc_test.go) that are SIGKILLed and
// replaced every couple of seconds, while the single server is SIGKILLed and
// restarted on its store, or a 3-node cluster loses a stream leader. Each task's
// result is a hash of its name and its parents' results, so a wrong or missing
// parent result shows in every task downstream; it also names the run's fencing
// token.
//
// From the complete history of the records and the workers' run logs the check
// asserts, per task: it ended done, with exactly one done write, made on the claim of
// the run whose token its result names, by that claim's worker; no run of it was
// claimed before each of its parents' done writes (fencing tokens and record
// revisions are one sequence, the records stream's) nor after its own, and none
// started (by the clock) after its done write; it was never claimed while waiting,
// went from waiting to released once, and was told of each parent at most once; its
// result is the one its parents' expected results give. The workflow ends done as
// WaitWorkflow sees it, also one WaitWorkflow called before the chaos, and the queue
// ends empty.

// flowID is the id of the chaos runs' workflow.
const flowID = "wf"

// flowGraph is a workflow's shape.
type flowGraph struct {
	names    []string            // every task, parents before their dependents, those added at run time too
	parents  map[string][]string // each task's parents: DependsOn's, then those added at run time
	enqueued []string            // the tasks enqueued (not added at run time), in order
	given    map[string][]string // their parents as enqueued (DependsOn)
	added    int                 // tasks added at run time
	layers   int
}

// flowAdds are the tasks that task name adds to the workflow when it runs
// (Job.AddTasks): two for about one task in six past the first layer, none for the
// others, for "end" and for the tasks added. The added tasks wait for their adder,
// and the adder's dependents wait for them too.
func flowAdds(name string) []string {
	if name == "end" || strings.HasPrefix(name, "L00-") || strings.Contains(name, "-x") {
		return nil
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	if h.Sum32()%6 != 0 {
		return nil
	}
	return []string{name + "-x0", name + "-x1"}
}

// flowSeed is the seed the graph is built from: WORKQ_CHAOS_SEED, else 1.
func flowSeed(t *testing.T) uint64 {
	s := os.Getenv("WORKQ_CHAOS_SEED")
	if s == "" {
		return 1
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("WORKQ_CHAOS_SEED=%q: %v", s, err)
	}
	return seed
}

// buildFlow lays out layers of width tasks (the first layer, the roots, a quarter as
// wide), named L<layer>-<index>: each task of a later layer depends on a task of the
// layer before (so chains run through every layer) and on up to two more of any
// earlier layer; then task "end" depends on the whole last layer.
func buildFlow(seed uint64, layers, width int) flowGraph {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	g := flowGraph{parents: map[string][]string{}, layers: layers + 1}
	var byLayer [][]string
	for l := range layers {
		n := width
		if l == 0 {
			n = max(2, width/4)
		}
		layer := make([]string, n)
		for i := range layer {
			name := fmt.Sprintf("L%02d-%03d", l, i)
			if l > 0 {
				ps := []string{byLayer[l-1][r.IntN(len(byLayer[l-1]))]}
				for more := r.IntN(3); more > 0; more-- {
					from := byLayer[r.IntN(l)]
					if p := from[r.IntN(len(from))]; !slices.Contains(ps, p) {
						ps = append(ps, p)
					}
				}
				g.parents[name] = ps
			}
			layer[i] = name
		}
		byLayer = append(byLayer, layer)
		g.names = append(g.names, layer...)
	}
	g.names = append(g.names, "end")
	g.parents["end"] = slices.Clone(byLayer[layers-1])
	g.enqueued, g.given = slices.Clone(g.names), map[string][]string{}
	for n, ps := range g.parents {
		g.given[n] = slices.Clone(ps)
	}
	// The tasks added at run time: after their adder, parents of its dependents.
	var names []string
	for _, n := range g.enqueued {
		names = append(names, n)
		for _, a := range flowAdds(n) {
			names = append(names, a)
			g.parents[a] = []string{n}
			g.added++
			for _, d := range g.enqueued {
				if slices.Contains(g.given[d], n) {
					g.parents[d] = append(g.parents[d], a)
				}
			}
		}
	}
	g.names = names
	return g
}

// values are the results every task must commit (their value part).
func (g flowGraph) values() map[string]string {
	v := make(map[string]string, len(g.names))
	for _, n := range g.names {
		var in []string
		for _, p := range byName(g.parents[n]) {
			in = append(in, v[p])
		}
		v[n] = taskValue(n, in)
	}
	return v
}

// byName is parents sorted by name: the order a task's value takes its parents'
// values in. (A record lists the parents added at run time in the order their
// adders committed, which no run can foresee.)
func byName(parents []string) []string { return slices.Sorted(slices.Values(parents)) }

// shape sums the graph up for the log: edges, diamonds are implied by the edges.
func (g flowGraph) shape() string {
	edges, widest := 0, 0
	dependents := map[string]int{}
	for _, n := range g.names {
		edges += len(g.parents[n])
		for _, p := range g.parents[n] {
			dependents[p]++
			widest = max(widest, dependents[p])
		}
	}
	return fmt.Sprintf("%d tasks in %d layers (the last one the fan-in \"end\" of %d; %d of them added at run time), %d dependencies, widest fan-out %d",
		len(g.names), g.layers, len(g.parents["end"]), g.added, edges, widest)
}

// taskValue is task name's result value given its parents' values, in order.
func taskValue(name string, parents []string) string {
	h := fnv.New64a()
	h.Write([]byte(name + "(" + strings.Join(parents, ",") + ")"))
	return fmt.Sprintf("%016x", h.Sum64())
}

// A task's result is "<value> <fencing token>".

// resultValue is the value part of a task's result; anything else (none, another
// form) is kept quoted, and so changes every value computed from it.
func resultValue(b []byte) string {
	if fs := strings.Fields(string(b)); len(fs) == 2 {
		return fs[0]
	}
	return strconv.Quote(string(b))
}

// resultToken is the fencing token a task's result names.
func resultToken(b []byte) (uint64, bool) {
	fs := strings.Fields(string(b))
	if len(fs) != 2 {
		return 0, false
	}
	tok, err := strconv.ParseUint(fs[1], 10, 64)
	return tok, err == nil
}

// taskSleep is how long task name's handler works: 2 to 6 ms.
func taskSleep(name string) time.Duration {
	h := fnv.New32a()
	h.Write([]byte(name))
	return time.Duration(2+h.Sum32()%5) * time.Millisecond
}

// flowHandler runs a task in a worker process: it logs the run, works a few ms, reads
// its parents' results and commits its own.
func flowHandler(runLog *os.File, worker string) consumer.Handler {
	return consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		start := time.Now()
		token, err := j.FencingToken(ctx)
		if err != nil {
			return err
		}
		if err := logRun(runLog, j, worker, token, start); err != nil {
			return err
		}
		select {
		case <-time.After(taskSleep(j.Task())):
		case <-ctx.Done():
			return ctx.Err()
		}
		if adds := flowAdds(j.Task()); len(adds) > 0 {
			tasks := make([]consumer.NewTask, len(adds))
			for i, a := range adds {
				tasks[i] = consumer.NewTask{Name: a, Payload: []byte(a)}
			}
			if err := j.AddTasks(tasks...); err != nil {
				return consumer.Permanent(err)
			}
		}
		var in []string
		for _, p := range byName(j.Parents()) {
			b, err := j.ParentResult(ctx, p)
			if errors.Is(err, consumer.ErrParentFailed) || errors.Is(err, consumer.ErrNotParent) {
				// Never so in a workflow whose tasks all succeed: dead-lettered, the
				// task fails the check with this error.
				return consumer.Permanent(err)
			}
			if err != nil {
				return err
			}
			in = append(in, resultValue(b))
		}
		j.SetResult(fmt.Appendf(nil, "%s %d", taskValue(j.Task(), in), token))
		return nil
	})
}

func TestChaosWorkflowSingleNode(t *testing.T) { chaosWorkflow(t, 1) }

func TestChaosWorkflowCluster(t *testing.T) { chaosWorkflow(t, 3) }

// waited is what a WaitWorkflow returned.
type waited struct {
	s   *producer.WorkflowStatus
	err error
	at  time.Time
}

// chaosWorkflow runs the workflow on one nats-server (SIGKILLed and restarted on its
// store) or a 3-node cluster with an R3 queue (stream leaders SIGKILLed), worker
// processes SIGKILLed and replaced all along.
func chaosWorkflow(t *testing.T, servers int) {
	sc := sizes()
	begin := time.Now()
	dir := workDir(t)
	q, where := "flow", "one nats-server"
	popts := []producer.Option{producer.GroupCommit(true)}
	if servers > 1 {
		q, where = "flowr3", fmt.Sprintf("a %d-node cluster, R3 queue", servers)
		popts = []producer.Option{producer.Replicas(servers)}
	}
	nodes := newNodes(t, dir, servers)
	for _, n := range nodes {
		n.start(t)
	}
	url := urls(nodes)
	nc, js := connect(t, url)
	waitJetStream(t, js, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), sc.flowBudget)
	defer cancel()
	newProducer := func(js jetstream.JetStream) *producer.Producer {
		var p *producer.Producer
		waitUntil(t, 60*time.Second, "the queue to be created", func() bool {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			var err error
			p, err = producer.New(pctx, js, q, popts...)
			return err == nil
		})
		return p
	}
	p := newProducer(js)
	o := observe(t, url, js, q)

	seed := flowSeed(t)
	g := buildFlow(seed, sc.flowLayers, sc.flowWidth)
	wf := producer.NewWorkflow(flowID)
	for _, name := range g.enqueued {
		wf.Task(name, producer.Job{Payload: []byte(name)}, producer.DependsOn(g.given[name]...))
	}
	enqueueStart := time.Now()
	if _, err := p.EnqueueWorkflow(ctx, wf); err != nil {
		t.Fatalf("enqueue the workflow: %v", err)
	}
	enqueueTime := time.Since(enqueueStart)

	// A WaitWorkflow called now, on a connection of its own, must see the workflow
	// end through the kills. It may lag: its watch (a nats.go ordered consumer) does
	// not survive a server's SIGKILL by itself, it is recreated only once its idle
	// heartbeats (5 s) have been missed at a check (every 10 s), 10–20 s after the
	// kill; then it replays what it missed, and WaitWorkflow sums the whole workflow
	// up again for each record update it hears (about 3.5 ms per update for 2000 tasks
	// here). Hence the 90 s it is given after the workflow ended.
	_, wjs := connect(t, url)
	wprod := newProducer(wjs)
	ectx, ecancel := context.WithCancel(context.Background())
	defer ecancel()
	early := make(chan waited, 1)
	go func() {
		s, err := wprod.WaitWorkflow(ectx, flowID)
		early <- waited{s, err, time.Now()}
	}()

	wp := &workerPool{t: t, dir: dir, queue: q, url: url, ackWait: sc.ackWait, concurrency: sc.flowConc, program: goWorker("workflow")}
	wp.start(sc.flowWorkers)
	chaosStart := time.Now()
	t.Logf("%s workflow run on %s: %s (seed %d), enqueued in %s; %d worker processes × %d, AckWait %s; up in %s",
		sc.name, where, g.shape(), seed, enqueueTime.Round(time.Millisecond), sc.flowWorkers, sc.flowConc, sc.ackWait,
		chaosStart.Sub(begin).Round(time.Millisecond))

	streams := []string{"WORKQ_" + q, "KV_WORKQ_" + q + "_JOBS"}
	n := len(g.names)
	var earlyGot *waited
	fs := newFaults(t, js, o, wp, nodes, streams, chaosStart, sc.flowServerKills, sc.flowLeaderKills, sc.flowWorkers, sc.killEvery)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// While a leader kill is under way, what was heard: reading back what was
		// not waits for the stream's leader.
		done := o.terminalJobs()
		if !fs.leaderKilling() {
			done = o.finishedJobs(nc, js)
		}
		if done >= n {
			break
		}
		if earlyGot == nil {
			select {
			case w := <-early:
				earlyGot = &w
				t.Logf("%6.2fs WaitWorkflow called before the chaos returned: %v %v", w.at.Sub(chaosStart).Seconds(), stateOf(w.s), w.err)
			default:
			}
			if earlyGot != nil && earlyGot.err == nil {
				break // the workflow ended, and not all done: the check says how
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("after %s: %d of %d tasks done; %d worker kills, %d server kills, %d leader kills; logs in %s\n%s",
				sc.flowBudget, done, n, fs.kills, fs.serverKill, fs.leaderKill, dir, unfinished(p, o))
		}
		fs.step(float64(done)/float64(n), fmt.Sprintf("%d/%d tasks done", done, n))
		<-tick.C
	}
	processing := time.Since(chaosStart)
	lastDoneSeen := time.Now()
	windows := fs.finish() // the workflow ended before the cluster was whole again

	// The workflow as its producer sees it, waited for with a generous deadline.
	wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
	s, err := p.WaitWorkflow(wctx, flowID)
	wcancel()
	switch {
	case err != nil:
		t.Errorf("VIOLATION: WaitWorkflow after every task's record said done: %v\n%s", err, unfinished(p, o))
	case s.State != producer.WorkflowDone || s.Counts[producer.StateDone] != n || len(s.Tasks) != n:
		t.Errorf("VIOLATION: workflow %s ended %s with %d tasks %v, want done with %d tasks done\n%s", flowID, s.State, len(s.Tasks), s.Counts, n, unfinished(p, o))
	}
	if earlyGot == nil {
		select {
		case w := <-early:
			earlyGot = &w
		case <-time.After(90*time.Second - time.Since(lastDoneSeen)):
		}
	}
	switch {
	case earlyGot == nil:
		t.Errorf("WaitWorkflow called before the chaos has not returned 90s after the workflow ended")
	case earlyGot.err != nil || earlyGot.s.State != producer.WorkflowDone:
		t.Errorf("WaitWorkflow called before the chaos returned %v, %v; want done", stateOf(earlyGot.s), earlyGot.err)
	}
	waitJobsAcked(t, js, q, 10*sc.ackWait)
	wp.stopAll(30 * time.Second)

	f := checkFlow(t, q, nc, js, o, wp, g, windows)
	if servers > 1 {
		f.pauses = pausesAround(o, windows)
	}
	lastDone, pace := flowTimes(o, g)
	t.Logf("%s workflow run on %s: %d worker kills, %d server kills, %d leader kills; processing %s (the last task done %s after the start; WaitWorkflow from before the chaos returned %s after that), total %s\n%s\n%s",
		sc.name, where, fs.kills, fs.serverKill, fs.leaderKill, processing.Round(time.Millisecond), lastDone.Sub(chaosStart).Round(time.Millisecond),
		earlyLag(earlyGot, lastDone), time.Since(begin).Round(time.Millisecond), pace, f)
}

func stateOf(s *producer.WorkflowStatus) string {
	if s == nil {
		return "no status"
	}
	return fmt.Sprintf("%s %v", s.State, s.Counts)
}

func earlyLag(w *waited, lastDone time.Time) string {
	if w == nil {
		return "never"
	}
	return w.at.Sub(lastDone).Round(time.Millisecond).String()
}

// unfinished lists the workflow's tasks that are not done, as the producer reads
// them, with the history the observer heard of each.
func unfinished(p *producer.Producer, o *observer) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := p.Workflow(ctx, flowID)
	if err != nil {
		return fmt.Sprintf("(the workflow's tasks could not be read: %v)", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "workflow %s: %s, tasks per state %v; not done:\n", s.ID, s.State, s.Counts)
	listed := 0
	for _, r := range s.Tasks {
		if r.State == producer.StateDone {
			continue
		}
		if listed++; listed > 40 {
			fmt.Fprintf(&b, "  … and %d more\n", len(s.Tasks)-s.Counts[producer.StateDone]-40)
			break
		}
		fmt.Fprintf(&b, "  %s: %s, attempt %d, waiting for %v, worker %q, last error %q; history %s\n",
			r.Task, r.State, r.Attempt, r.WaitingFor, r.Worker.Name, r.LastError, o.historyOf(r.ID))
	}
	return b.String()
}

// checkFlow checks the workflow's run from the complete history of its records and
// the workers' run logs (see the top of this file).
func checkFlow(t *testing.T, q string, nc *nats.Conn, js jetstream.JetStream, o *observer, wp *workerPool, g flowGraph, windows []window) figures {
	t.Helper()
	var f figures
	f.jobs = len(g.names)
	unknownRev := completeHistory(t, nc, js, o, windows, &f)
	o.mu.Lock()
	defer o.mu.Unlock()

	byKey, runsOf := histories(o, wp, &f)
	for _, c := range deadLetters(t, js, q) {
		f.deadLetters += c
	}
	if f.deadLetters != 0 {
		t.Errorf("VIOLATION: %d dead letters; no task fails", f.deadLetters)
	}
	taskID := func(name string) string { return flowID + "." + name }
	isTask := map[string]bool{}
	for _, name := range g.names {
		isTask[taskID(name)] = true
	}
	mark := workflow.EnqueueKey(flowID)
	for key, revs := range byKey {
		switch {
		case key == mark:
			// The enqueue's mark (for the sweep): written before the first record,
			// deleted once the roots were published.
			if revs[0].op != "" || revs[len(revs)-1].op == "" {
				t.Errorf("VIOLATION: the workflow enqueue's mark %s was not written and then deleted: %s", key, history(revs))
			}
		case !isTask[key]:
			t.Errorf("VIOLATION: a record for %s, no task of the workflow: %s", key, history(revs))
		}
	}
	// Each task's done writes, first: its dependents' checks need its parents'.
	dones := map[string][]*revision{}
	for _, name := range g.names {
		for _, r := range byKey[taskID(name)] {
			if r.rec.State == "done" {
				dones[name] = append(dones[name], r)
			}
		}
	}
	want := g.values()

	for _, name := range g.names {
		id := taskID(name)
		revs, runs := byKey[id], runsOf[id]
		desc := func() string {
			s := "history: " + history(revs) + "; runs:"
			for _, r := range runs {
				s += fmt.Sprintf(" [attempt %d on %s, token %d, at %s]", r.attempt, r.worker, r.token, r.at.Format("15:04:05.000"))
			}
			if u := unknownRev[id]; len(u) > 0 {
				s += fmt.Sprintf("; unheard revisions %v", u)
			}
			return s
		}
		if len(runs) > 0 {
			f.jobsRan++
			f.extraRuns += len(runs) - 1
		}
		tokens := distinctRuns(t, "task "+name, runs, &f, desc)
		if len(revs) == 0 {
			t.Errorf("VIOLATION (lost task): task %s has no record; %s", name, desc())
			continue
		}
		created, adders := g.given[name], 0
		if created == nil { // added at run time, waiting for its adder
			created = g.parents[name]
		}
		for _, p := range created {
			if len(flowAdds(p)) > 0 {
				adders++
			}
		}
		checkRelease(t, name, g.parents[name], created, adders, revs, o.revs, desc)

		final := revs[len(revs)-1]
		switch {
		case final.rec.State == "dead":
			f.dead++
			fallthrough
		case final.rec.State != "done":
			t.Errorf("VIOLATION: task %s ended %s (%s), not done; %s", name, final.rec.State, final.rec.LastError, desc())
			continue
		case len(dones[name]) != 1:
			t.Errorf("VIOLATION (committed %d times): task %s; %s", len(dones[name]), name, desc())
			continue
		}
		f.done++
		if !slices.Equal(byName(final.rec.Parents), byName(g.parents[name])) {
			t.Errorf("VIOLATION: task %s's record names parents %v, the workflow gave %v", name, final.rec.Parents, g.parents[name])
		}

		// The committed run: its result names its token, which must be its claim's
		// revision. The claim is the first revision naming the run, the revisions
		// from it to the commit its renewals.
		token, ok := resultToken(final.rec.Result)
		if !ok {
			t.Errorf("VIOLATION: task %s committed result %q, not a value and a token; %s", name, final.rec.Result, desc())
			continue
		}
		first := len(revs) - 1
		for first > 0 && final.rec.Run != "" && revs[first-1].rec.Run == final.rec.Run {
			first--
		}
		// A sequence overwritten unheard is known by its key when a revision heard
		// names it as its previous one; else its key is "?".
		unheard := func(seq uint64) bool {
			return slices.Contains(unknownRev[id], seq) || slices.Contains(unknownRev["?"], seq)
		}
		if first == len(revs)-1 {
			// No revision of the run heard before its commit: the observer lost its
			// claim and renewals with a kill, so the commit follows an unheard one, or
			// was read back at the end (its previous revision unknown) with its claim
			// unheard between the last revision heard and it.
			afterUnheard := final.prev != 0 && unheard(final.prev) && token <= final.prev
			readBack := final.readBack && final.prev == 0 && token < final.seq && (first == 0 || token > revs[first-1].seq)
			if !afterUnheard && !readBack || !unheard(token) {
				t.Errorf("VIOLATION: task %s committed (token %d in its result) without a claim before it; %s", name, token, desc())
				continue
			}
		} else {
			claim, last := revs[first], revs[len(revs)-2]
			onLast := final.prev == last.seq || final.prev > last.seq && unheard(final.prev) || final.readBack && final.prev == 0
			if !onLast || claim.rec.State != "running" {
				t.Errorf("VIOLATION (commit not on the latest claim): task %s: done at rev %d follows rev %d; %s", name, final.seq, final.prev, desc())
				continue
			}
			// The claim is the first revision heard, or an unheard one before it.
			if token != claim.seq && !(claim.prev != 0 && unheard(claim.prev) && token <= claim.prev && unheard(token)) {
				t.Errorf("VIOLATION (result of another run): task %s committed token %d's result on the claim at rev %d; %s", name, token, claim.seq, desc())
			}
			if claim.rec.Worker == nil || final.rec.Worker == nil || claim.rec.Worker.Name != final.rec.Worker.Name {
				t.Errorf("VIOLATION: task %s committed by another worker than its claim's; %s", name, desc())
			}
		}
		committed, ran := tokens[token]
		if !ran {
			t.Errorf("VIOLATION: task %s committed on token %d, but no run with that token started; %s", name, token, desc())
		} else if final.rec.Worker == nil || committed.worker != final.rec.Worker.Name {
			t.Errorf("VIOLATION: task %s: the run with token %d ran on %s, its commit names another worker; %s", name, token, committed.worker, desc())
		}

		// Order: every run of the task was claimed after each parent's done write,
		// and before the task's own; none started after it.
		for _, parent := range g.parents[name] {
			pd := dones[parent]
			if len(pd) == 0 {
				t.Errorf("VIOLATION: task %s is done, its parent %s is not", name, parent)
				continue
			}
			if token <= pd[0].seq {
				t.Errorf("VIOLATION (ran before its parent committed): task %s committed on a claim at rev %d, its parent %s was done at rev %d; %s",
					name, token, parent, pd[0].seq, desc())
			}
			for _, r := range runs {
				if r.token <= pd[0].seq && r.token != token {
					t.Errorf("VIOLATION (ran before its parent committed): task %s ran on a claim at rev %d (attempt %d on %s), its parent %s was done at rev %d; %s",
						name, r.token, r.attempt, r.worker, parent, pd[0].seq, desc())
				}
			}
		}
		for _, r := range runs {
			if r.token >= final.seq {
				t.Errorf("VIOLATION (run after its commit): task %s ran on a claim at rev %d, after its done write at rev %d; %s", name, r.token, final.seq, desc())
			}
			if !r.at.IsZero() && r.at.After(final.at) {
				t.Errorf("VIOLATION (run after its commit): task %s: a run (token %d on %s) started %s after its done write; %s",
					name, r.token, r.worker, r.at.Sub(final.at), desc())
			}
			if rv := o.revs[r.token]; rv != nil && (rv.key != id || rv.rec.State != "running") {
				t.Errorf("VIOLATION: task %s ran with token %d, which is not a claim of it (rev %d is %s %s); %s", name, r.token, rv.seq, rv.key, rv.rec.State, desc())
			}
		}

		// The result: what the parents' expected results give.
		if got := resultValue(final.rec.Result); got != want[name] {
			in := make([]string, len(g.parents[name]))
			parentsRight := true
			for i, parent := range byName(g.parents[name]) {
				if len(dones[parent]) > 0 {
					in[i] = resultValue(dones[parent][0].rec.Result)
				}
				parentsRight = parentsRight && in[i] == want[parent]
			}
			why := "its parents' committed results are not all right (see them)"
			if parentsRight {
				why = "its parents' committed results are right: it read a wrong or missing one, or the wrong parents"
			}
			if got == taskValue(name, in) {
				why = "it is what its parents' committed results give; one of them is wrong"
			}
			t.Errorf("VIOLATION (wrong result): task %s committed value %s, want %s: %s; %s", name, got, want[name], why, desc())
		}
	}
	f.reassigned = wp.logLines("was reassigned")
	if left := jobsLeft(t, js, q); left != 0 {
		t.Errorf("VIOLATION: the jobs stream WORKQ_%s holds %d messages after the workflow ended and the workers stopped:\n%s", q, left, leftover(js, q))
	}
	return f
}

// checkRelease checks task name's release from what was heard of its record (revs,
// in order; all is every revision heard, by sequence): a root is never waiting; a
// task with parents is created waiting for all of them, each write while it waits
// tells it of at least one more parent (telling twice changes nothing), it leaves
// waiting once and never comes back, and it is never claimed over a waiting record.
//
// A task created waiting for created (its parents as enqueued, or the task that added
// it) may be given more parents by adders' commits (Job.AddTasks): such a write adds to
// what it waits for and tells nothing.
func checkRelease(t *testing.T, name string, parents, created []string, adders int, revs []*revision, all map[uint64]*revision, desc func() string) {
	t.Helper()
	waiting, left := 0, false
	var lastWaiting []string
	var lastSeq uint64 // the revision lastWaiting is of
	for i, r := range revs {
		if r.rec.State == "running" {
			if prev := all[r.prev]; prev != nil && prev.key == r.key && prev.rec.State == "waiting" {
				t.Errorf("VIOLATION (claimed while waiting): task %s: claim at rev %d over waiting rev %d; %s", name, r.seq, prev.seq, desc())
			}
		}
		if r.rec.State != "waiting" {
			left = true
			continue
		}
		waiting++
		switch {
		case len(parents) == 0:
			t.Errorf("VIOLATION: root task %s was recorded waiting (rev %d); %s", name, r.seq, desc())
		case left:
			t.Errorf("VIOLATION: task %s waits again at rev %d after it was released; %s", name, r.seq, desc())
		case i == 0 && r.prev == 0 && !r.readBack && !slices.Equal(r.rec.WaitingFor, created):
			t.Errorf("VIOLATION: task %s was created waiting for %v, not its parents %v; %s", name, r.rec.WaitingFor, created, desc())
		case lastWaiting != nil && r.prev != lastSeq:
			// A revision between the two was not heard (a kill window): what it
			// did is unknown, only that the task waits for parents of its own.
			if !subset(r.rec.WaitingFor, parents) {
				t.Errorf("VIOLATION: task %s waits at rev %d for %v, not all its parents %v; %s", name, r.seq, r.rec.WaitingFor, parents, desc())
			}
		case lastWaiting != nil && subset(lastWaiting, r.rec.WaitingFor) && len(r.rec.WaitingFor) > len(lastWaiting):
			// An adder's commit: every name it adds is a parent added at run time.
			for _, p := range r.rec.WaitingFor {
				if !slices.Contains(lastWaiting, p) && (slices.Contains(created, p) || !slices.Contains(parents, p)) {
					t.Errorf("VIOLATION: task %s: rev %d made it wait for %s, no parent added at run time; %s", name, r.seq, p, desc())
				}
			}
		case lastWaiting != nil && (len(r.rec.WaitingFor) >= len(lastWaiting) || !subset(r.rec.WaitingFor, lastWaiting)):
			t.Errorf("VIOLATION: task %s: a telling at rev %d left it waiting for %v, after %v; %s", name, r.seq, r.rec.WaitingFor, lastWaiting, desc())
		}
		lastWaiting, lastSeq = r.rec.WaitingFor, r.seq
	}
	if waiting > len(parents)+adders {
		t.Errorf("VIOLATION: task %s has %d waiting revisions for %d parents (%d of its parents added tasks); %s", name, waiting, len(parents), adders, desc())
	}
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// flowTimes sums up the workflow's pace from the records' history: when its last
// task was done, and the longest waits between a task's last parent's done write and
// its release (a worker that dies between its commit and the telling leaves that to
// the next delivery, an AckWait later), and between its release and its first claim.
func flowTimes(o *observer, g flowGraph) (lastDone time.Time, summary string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	byKey := map[string][]*revision{}
	for _, r := range o.revs {
		byKey[r.key] = append(byKey[r.key], r)
	}
	doneAt, releasedAt, claimedAt := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	for _, name := range g.names {
		revs := byKey[flowID+"."+name]
		slices.SortFunc(revs, func(a, b *revision) int { return cmp.Compare(a.seq, b.seq) })
		for _, r := range revs {
			switch r.rec.State {
			case "queued":
				if releasedAt[name].IsZero() {
					releasedAt[name] = r.at
				}
			case "running":
				if claimedAt[name].IsZero() {
					claimedAt[name] = r.at
				}
			case "done":
				doneAt[name] = r.at
				if r.at.After(lastDone) {
					lastDone = r.at
				}
			}
		}
	}
	var tell, claim time.Duration
	var tellTask, claimTask string
	for _, name := range g.names {
		if len(g.parents[name]) > 0 && !releasedAt[name].IsZero() {
			var parents time.Time
			for _, p := range g.parents[name] {
				if doneAt[p].After(parents) {
					parents = doneAt[p]
				}
			}
			if d := releasedAt[name].Sub(parents); !parents.IsZero() && d > tell {
				tell, tellTask = d, name
			}
		}
		if !releasedAt[name].IsZero() && !claimedAt[name].IsZero() {
			if d := claimedAt[name].Sub(releasedAt[name]); d > claim {
				claim, claimTask = d, name
			}
		}
	}
	return lastDone, fmt.Sprintf("longest from a task's last parent done to its release: %s (%s); from a release to the first claim: %s (%s)",
		tell.Round(time.Millisecond), tellTask, claim.Round(time.Millisecond), claimTask)
}
