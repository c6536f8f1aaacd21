// Package chaos is workq's real-process chaos suite. Its tests carry the build tag
// "chaos", so the ordinary test run skips them:
//
//	go test -tags chaos -count=1 -v ./chaos                     # short: about 2 minutes
//	WORKQ_CHAOS=full go test -tags chaos -count=1 -v -timeout 30m ./chaos  # full: 2½–4 minutes
//
// A failed run keeps its directory (server stores and logs, each worker's workq log and
// run log) and names it; WORKQ_CHAOS_KEEP=1 keeps a passing run's too.
//
// The tests build the workq and nats-server binaries from the module (nothing else is
// needed but Go and a POSIX sh) and run them as processes on 127.0.0.1: a nats-server
// with sync_interval: always, several `workq work` processes running a shell command per
// job, then a 3-node cluster with an R3 queue, workers and producers with group commit
// on (record writes and enqueues in atomic batches). Workers are SIGKILLed and replaced,
// SIGSTOPped past AckWait and resumed; the server is SIGKILLed and restarted on the same
// store; the cluster loses its stream leader to SIGKILL.
//
// Every revision of every job record is observed: the records bucket's stream is given a
// RePublish rule to a core subject, which the server publishes synchronously as it stores
// each revision, with the revision's stream sequence and the key's previous sequence in
// headers. A capture stream cannot take these (they carry the CAS writes'
// Nats-Expected-Last-Subject-Sequence headers, which a second stream would enforce), so
// the test subscribes to them itself. The check then proves completeness: every
// sequence from 1 to the bucket stream's last is either observed or read back from the
// stream; a revision that was overwritten while the observer could not hear it (a
// server SIGKILL drops what it had not yet republished) is reported, and it fails the
// test unless it was written inside a kill window.
//
// From that history and the workers' run logs (the job command appends "job attempt
// worker token" to a per-worker file before it does anything else) the check asserts:
// every confirmed job ends done or dead; at most one done write per job, written on the
// job's latest claim by the claim's worker, with the output of the run that held that
// claim's fencing token; no two runs of a job share an attempt number or a token;
// every dead job has exactly one dead letter; the jobs stream ends empty. It reports
// stale commits refused (worker log lines "job <id> was reassigned"), duplicate runs,
// and, for each leader kill, the election time and the longest gap between commits.
//
// The workflow runs (workflow_test.go) enqueue one workflow built from a seed
// (WORKQ_CHAOS_SEED, default 1): layers of tasks, each depending on one to three tasks
// of earlier layers, and a last task depending on the whole last layer; about 300
// tasks short, 2000 full. Their workers are the test binary itself, started again as
// a Go worker process (workerproc_test.go): each task's handler logs its run as the
// job command does, reads its parents' results (Job.ParentResult) and commits a hash
// of them with its fencing token. Workers are SIGKILLed and replaced every 2 s while
// the single server is SIGKILLed and restarted, or the cluster loses a stream leader.
// Beyond the invariants above, the check asserts for every task that each of its runs
// was claimed after each parent's done write (fencing tokens and record revisions are
// one sequence), none after its own, that it was released once and never claimed
// while waiting, and that its result is the one its parents' expected results give;
// the workflow ends done, as WaitWorkflow sees it, and the queue ends empty.
//
// The sequence runs (sequence_test.go) enqueue jobs over many keys (400 over 40 short,
// 20 000 over 500 full), each key's in order, partly while the chaos runs, half of
// them in batches (EnqueueBatch: the next 2 to 4 jobs, full 2 to 5, of each of 2 to 5
// keys, interleaved, laid out from WORKQ_CHAOS_SEED) and half one at a time, on the
// same Go workers SIGKILLed every 2 s, through a server SIGKILL, then on the cluster
// through the records bucket's leader's SIGKILL (full: the jobs stream's too). The
// check asserts per key, from every record write and run log, that each job ended
// done once, that every run of job n+1 was claimed (and started) after job n's done
// write, that a job waited for exactly the job before it or for none when that had
// ended, was released once and never claimed while waiting, and that no sequence link
// is left at the end.
package chaos
