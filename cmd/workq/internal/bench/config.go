package bench

import "time"

// Scenarios are the scenarios Run knows, in the order `workq bench` lists them.
// The last four are not in DefaultScenarios.
var Scenarios = []string{"enqueue-single", "enqueue-batch", "schedule-enqueue", "process-unfenced", "process-fenced", "process-priority", "latency", "wait", "redelivery", "lock", "limiter", "workflow", "sequence", "backlog", "schedule-burst"}

// DefaultScenarios are the scenarios run when none are named: all but workflow,
// sequence, backlog and schedule-burst, which are long (a workflow of --jobs tasks
// per concurrency, about a minute a run at the defaults on 2 cores; --jobs keyed
// jobs per concurrency, each enqueue an atomic batch of the records bucket, over a
// minute a run at the defaults; a million jobs deep; 100 000 due at once).
var DefaultScenarios = Scenarios[:len(Scenarios)-4]

// Config is what Run runs: which scenarios, how often and how big. `workq bench`
// fills it from its flags, which hold the defaults (named below) and check the
// values.
type Config struct {
	// Scenarios are the names of the scenarios to run, from Scenarios, in the order
	// given (--scenario; default DefaultScenarios).
	Scenarios []string
	// Runs is how often each scenario runs; the report holds the medians and the
	// spread of the ratio (--runs, default 1).
	Runs int
	// Jobs is the jobs per throughput scenario (enqueue, process), the tasks of the
	// workflow scenario's fan-out/fan-in, the keyed jobs of the sequence scenario's
	// drain, and the operations of the limiter scenario (--jobs, default 20 000).
	Jobs int
	// SequenceKeys is how many keys the sequence scenario's drain spreads its Jobs
	// over, 1 to Jobs (--sequence-keys; 0, the default, is Jobs/10: 10 jobs a key).
	SequenceKeys int
	// Samples is the samples per latency scenario (latency, wait, lock, the links of
	// the workflow scenario's chain, and the handoffs of the sequence scenario's hot
	// key) (--samples, default 300).
	Samples int
	// Concurrency and Prefetch are the worker settings the process scenarios run
	// with, one step per pair, and Concurrency the workflow scenario's fan-out/fan-in
	// and the sequence scenario's drain, one step each (--concurrency, default 8, 32,
	// 128; --prefetch, default 0: the worker's adaptive default).
	Concurrency, Prefetch []int
	// AckWait is the redelivery scenario's AckWait (--ack-wait, default 1s): each
	// stall waits for it, so it sets how long the scenario takes.
	AckWait time.Duration
	// Redeliveries is the stalls per run of the redelivery scenario
	// (--redeliveries, default 3).
	Redeliveries int
	// Backlog is the backlog scenario (--backlog, --backlog-base,
	// --backlog-concurrency, --backlog-prefetch, --backlog-fenced). Its Worker is
	// Run's to set: see Child.
	Backlog BacklogConfig
	// Child, when set, runs the backlog's worker in a child process of this binary
	// (WorkerCommand), so that the peak RSS it reports is the worker's alone: with
	// the embedded server this process also holds the server. nil runs the worker in
	// this process, with no RSS figure (--backlog-in-process, for tests).
	Child Login
	// Burst is the schedule-burst scenario (--burst, --burst-concurrency,
	// --burst-lead).
	Burst BurstConfig
	// GroupCommit, when set, turns workq's group commit on or off (--group-commit);
	// nil is auto: the library's default, except on a server that fsyncs every write,
	// where it is on (there a commit waits for its fsync, and batches share them).
	GroupCommit *bool
	// JobTime is how long each job's handler takes in the process scenarios, on the
	// workq side (--job-time, default 0: empty handlers). The raw side stays empty, so
	// with a JobTime the process scenarios have no target.
	JobTime time.Duration
}

// sequenceKeys is the keys of the sequence scenario's drain: SequenceKeys, or Jobs/10
// when it is 0.
func (c Config) sequenceKeys() int {
	if c.SequenceKeys > 0 {
		return c.SequenceKeys
	}
	return max(c.Jobs/10, 1)
}
