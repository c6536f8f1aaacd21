//go:build chaos

package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// window is a stretch of time in which the observer may miss republished revisions:
// from a server's SIGKILL until the observer hears the server (or the new leader) again.
type window struct {
	what     string
	from, to time.Time
}

// figures are what a chaos run reports.
type figures struct {
	jobs, done, dead         int
	revisions, readBack      int
	unobserved               int // overwritten revisions written inside a kill window, never heard
	reassigned               int // "job <id> was reassigned" lines: stale commits refused
	runs, extraRuns, jobsRan int // command starts; beyond one per job (and the flaky jobs' planned retry)
	maxAttempt               int
	deadLetters              int
	afterEnd                 int // runs whose claim came after their job's record became terminal: must stay 0
	pauses                   []string
}

// expectedRuns is how many runs a job's payload needs without any chaos.
func expectedRuns(payload string) int {
	if payload == "flaky" {
		return 2
	}
	return 1
}

// histories are a run's record writes by key, each key's in revision order, and the
// workers' logged runs by job (counted in f.runs). The caller holds o.mu.
func histories(o *observer, wp *workerPool, f *figures) (map[string][]*revision, map[string][]run) {
	byKey := map[string][]*revision{}
	for _, r := range o.revs {
		byKey[r.key] = append(byKey[r.key], r)
	}
	for _, revs := range byKey {
		slices.SortFunc(revs, func(a, b *revision) int { return cmp.Compare(a.seq, b.seq) })
	}
	runsOf := map[string][]run{}
	for _, r := range wp.runs() {
		runsOf[r.job] = append(runsOf[r.job], r)
		f.runs++
	}
	return byKey, runsOf
}

// check verifies the invariants from the complete history of the job records:
// every confirmed job is done or dead; at most one done write per job, on the job's
// latest claim, with that run's output; every dead job in dead letters; the jobs
// stream empty.
func check(t *testing.T, q string, nc *nats.Conn, js jetstream.JetStream, o *observer, wp *workerPool, jobs map[string]string, windows []window) figures {
	t.Helper()
	var f figures
	f.jobs = len(jobs)
	// 1. Completeness: every sequence of the records stream was heard, or is still in
	// the stream (read back), or was written inside a kill window.
	unknownRev := completeHistory(t, nc, js, o, windows, &f)
	o.mu.Lock()
	defer o.mu.Unlock()

	// 2. Each job's history.
	byKey, runsOf := histories(o, wp, &f)
	dead := deadLetters(t, js, q)
	for _, ids := range dead {
		f.deadLetters += ids
	}
	for key := range byKey {
		if _, ok := jobs[key]; !ok {
			t.Errorf("VIOLATION: a record for job %s, which was never enqueued: %s", key, history(byKey[key]))
		}
	}
	for id, payload := range jobs {
		revs, runs := byKey[id], runsOf[id]
		desc := func() string {
			s := "history: " + history(revs) + "; runs:"
			for _, r := range runs {
				s += fmt.Sprintf(" [attempt %d on %s, token %d]", r.attempt, r.worker, r.token)
			}
			if u := unknownRev[id]; len(u) > 0 {
				s += fmt.Sprintf("; unheard revisions %v", u)
			}
			return s
		}
		if len(runs) > 0 {
			f.jobsRan++
			f.extraRuns += max(0, len(runs)-expectedRuns(payload))
		}
		ran := distinctRuns(t, "job "+id, runs, &f, desc)
		tokens := func(tok uint64) bool { _, ok := ran[tok]; return ok }
		// No run after the end: every run's token (its claim's revision) comes
		// before the job's first terminal revision heard.
		for _, r := range revs {
			if r.rec.State == "done" || r.rec.State == "dead" || r.rec.State == "cancelled" {
				for tok := range ran {
					if tok > r.seq {
						f.afterEnd++
						t.Errorf("VIOLATION (run after the end): job %s: a run with token %d started after its record became %s at rev %d; %s", id, tok, r.rec.State, r.seq, desc())
					}
				}
				break
			}
		}
		if len(revs) == 0 {
			t.Errorf("VIOLATION (lost job): job %s (%s) was confirmed but has no record; %s", id, payload, desc())
			continue
		}
		final := revs[len(revs)-1]
		var dones []*revision
		for _, r := range revs {
			if r.rec.State == "done" {
				dones = append(dones, r)
			}
		}
		if len(dones) > 1 {
			t.Errorf("VIOLATION (committed twice): job %s has %d done writes; %s", id, len(dones), desc())
		}
		switch final.rec.State {
		case "done":
			f.done++
			if len(dones) != 1 || dones[0] != final {
				break // reported above
			}
			if payload == "poison" {
				t.Errorf("VIOLATION: poison job %s was committed; %s", id, desc())
			}
			// The commit's run: its claim is the first revision naming the run, and the
			// revisions from it to the commit are the run's renewals (a claim is renewed
			// at every heartbeat, by compare-and-set).
			first := len(revs) - 1
			for first > 0 && final.rec.Run != "" && revs[first-1].rec.Run == final.rec.Run {
				first--
			}
			if first == len(revs)-1 {
				if final.prev != 0 && slices.Contains(unknownRev[id], final.prev) {
					// The run's claim and renewals were stored but not heard: the observer
					// lost them with a killed leader. The committed result names the run's
					// token, which a run must have started with, at or below the revision
					// the commit was written over.
					var token uint64
					if _, err := fmt.Sscanf(string(final.rec.Result), "r "+id+" %d\n", &token); err != nil || token > final.prev {
						t.Errorf("VIOLATION (result of another run): job %s: committed result %q over an unheard claim at or below %d; %s", id, final.rec.Result, final.prev, desc())
					}
					if !tokens(token) {
						t.Errorf("VIOLATION: job %s committed on unheard token %d, but no run with that token started; %s", id, token, desc())
					}
					break
				}
				if final.readBack && final.prev == 0 {
					// The commit itself was not heard (read back at the end: the revision it
					// was written over is unknown), nor the run's claim: the token its result
					// names must be an unheard sequence (its key unknown when no revision heard
					// names it as its previous one) between the last revision heard and it.
					var token uint64
					_, err := fmt.Sscanf(string(final.rec.Result), "r "+id+" %d\n", &token)
					unheard := slices.Contains(unknownRev[id], token) || slices.Contains(unknownRev["?"], token)
					if err != nil || !unheard || token >= final.seq || first > 0 && token <= revs[first-1].seq || !tokens(token) {
						t.Errorf("VIOLATION (result of another run): job %s: committed result %q read back, with no unheard claim of a run that started before it; %s", id, final.rec.Result, desc())
					}
					break
				}
				t.Errorf("VIOLATION: job %s was committed without a claim before it (workq work claims every run first); %s", id, desc())
				break
			}
			claim, last := revs[first], revs[len(revs)-2]
			// A revision read back at the end, not heard live, has no previous revision
			// to check.
			onLast := final.prev == last.seq || final.prev > last.seq && slices.Contains(unknownRev[id], final.prev) ||
				final.readBack && final.prev == 0
			if !onLast || claim.rec.State != "running" {
				t.Errorf("VIOLATION (commit not on the latest claim): job %s: done at rev %d follows rev %d; %s", id, final.seq, final.prev, desc())
				break
			}
			if claim.rec.Worker == nil || final.rec.Worker == nil || claim.rec.Worker.Name != final.rec.Worker.Name {
				t.Errorf("VIOLATION: job %s committed by another worker than its claim's; %s", id, desc())
			}
			// The run's claim is its first revision heard, or, when the revision that one
			// was written over was not heard (lost with a killed leader: the claim, the
			// renewals heard after it), an unheard one at or below that.
			token := claim.seq
			if claim.prev != 0 && slices.Contains(unknownRev[id], claim.prev) {
				var t2 uint64
				if _, err := fmt.Sscanf(string(final.rec.Result), "r "+id+" %d\n", &t2); err == nil && t2 <= claim.prev && slices.Contains(unknownRev[id], t2) {
					token = t2
				}
			}
			want := fmt.Sprintf("r %s %d\n", id, token)
			if string(final.rec.Result) != want {
				t.Errorf("VIOLATION (result of another run): job %s: committed result %q, want %q (the latest claim's run); %s", id, final.rec.Result, want, desc())
			}
			if !tokens(token) {
				t.Errorf("VIOLATION: job %s committed on token %d, but no run with that token started; %s", id, token, desc())
			}
		case "dead":
			f.dead++
			if payload != "poison" {
				t.Logf("job %s (%s) went to dead letters: %s", id, payload, final.rec.LastError)
			}
			if dead[id] != 1 {
				t.Errorf("VIOLATION: dead job %s has %d dead letters, want 1; %s", id, dead[id], desc())
			}
		default:
			t.Errorf("VIOLATION (lost job): job %s (%s) ended %s, not done or dead; %s", id, payload, final.rec.State, desc())
		}
	}
	f.reassigned = wp.logLines("was reassigned")

	// 3. Nothing is left in the jobs stream: the run waited for it with workers up
	// (waitJobsAcked), and stopping them must not have put anything back.
	if left := jobsLeft(t, js, q); left != 0 {
		t.Errorf("VIOLATION: the jobs stream WORKQ_%s holds %d messages after the workers stopped", q, left)
	}
	return f
}

// completeHistory completes o's history of the records bucket (check's step 1): every
// sequence from 1 to the stream's last was heard, or is read back from the stream, or
// was overwritten unheard inside one of the kill windows — anything else fails the
// test. It counts revisions in f and returns, by job, the sequences overwritten
// unheard.
func completeHistory(t *testing.T, nc *nats.Conn, js jetstream.JetStream, o *observer, windows []window, f *figures) map[string][]uint64 {
	t.Helper()
	last := o.catchUp(js)
	_, lost := o.fillGaps(nc, last)
	o.mu.Lock()
	for _, r := range o.revs { // read back now, or during the run (finishedJobs)
		if r.readBack {
			f.readBack++
		}
	}
	defer o.mu.Unlock()
	for _, c := range o.conflicts {
		t.Errorf("VIOLATION (durability): %s", c)
	}
	for _, b := range o.bad {
		t.Errorf("VIOLATION: %s", b)
	}
	f.revisions = len(o.revs)
	unknownRev := map[string][]uint64{} // job → its revisions nobody saw
	for _, s := range lost {
		var lo, hi *revision
		for p := s - 1; p >= 1 && lo == nil; p-- {
			lo = o.revs[p]
		}
		for n := s + 1; n <= last && hi == nil; n++ {
			hi = o.revs[n]
		}
		key := "?"
		for _, r := range o.revs {
			if r.prev == s {
				key = r.key
			}
		}
		explained := ""
		for _, w := range windows {
			if (lo == nil || !lo.at.After(w.to.Add(250*time.Millisecond))) && (hi == nil || !hi.at.Before(w.from.Add(-250*time.Millisecond))) {
				explained = w.what
			}
		}
		if explained == "" {
			t.Errorf("INCOMPLETE HISTORY: records sequence %d (job %s) was overwritten without being heard, outside any kill window (between %v and %v)", s, key, lo, hi)
			continue
		}
		f.unobserved++
		unknownRev[key] = append(unknownRev[key], s)
		t.Logf("records sequence %d (job %s) was overwritten unheard during %s", s, key, explained)
	}
	return unknownRev
}

// waitJobsAcked waits, with the workers still running, until the jobs stream is empty.
// A job whose record is done may still be there for a while: its worker was killed
// between commit and ack, and the next worker it is redelivered to (after AckWait)
// acks it without running it.
func waitJobsAcked(t *testing.T, js jetstream.JetStream, q string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := jobsLeft(t, js, q)
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("VIOLATION: the jobs stream WORKQ_%s still holds %d messages %s after every job finished, with workers running:\n%s", q, left, d, leftover(js, q))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jobsLeft returns how many jobs the jobs stream still holds, not counting the
// messages the server orphaned in a crash (orphans), which it logs.
func jobsLeft(t *testing.T, js jetstream.JetStream, q string) uint64 {
	t.Helper()
	var left uint64
	var s jetstream.Stream
	waitUntil(t, 30*time.Second, "the jobs stream's info", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var err error
		if s, err = js.Stream(ctx, "WORKQ_"+q); err != nil {
			return false
		}
		left = s.CachedInfo().State.Msgs
		return true
	})
	if left == 0 {
		return 0
	}
	return left - min(left, uint64(len(orphans(t, js, s, q))))
}

// leftover lists, for a message, the messages the jobs stream of q holds: by subject,
// with their job's record state.
func leftover(js jetstream.JetStream, q string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "WORKQ_"+q)
	if err != nil {
		return fmt.Sprintf("  (stream not read: %v)", err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("workq."+q+".>"))
	if err != nil {
		return fmt.Sprintf("  (stream not read: %v)", err)
	}
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		return fmt.Sprintf("  (records not read: %v)", err)
	}
	subjects := slices.Sorted(maps.Keys(info.State.Subjects))
	var b strings.Builder
	for i, subj := range subjects {
		if i == 20 {
			fmt.Fprintf(&b, "  … and %d more subjects\n", len(subjects)-i)
			break
		}
		fmt.Fprintf(&b, "  %s (%d message(s))", subj, info.State.Subjects[subj])
		if m, err := s.GetLastMsgForSubject(ctx, subj); err == nil {
			fmt.Fprintf(&b, ", last at sequence %d, stored %s", m.Sequence, m.Time.Format("15:04:05.000"))
		}
		tok := subj[strings.LastIndex(subj, ".")+1:]
		if _, after, ok := strings.Cut(subj, ".jobs."); ok { // ids may hold dots (a workflow's task ids do)
			tok = after
		}
		if e, err := kv.Get(ctx, tok); err != nil {
			fmt.Fprintf(&b, "; record %s: %v\n", tok, err)
		} else {
			var rec jobRec
			_ = json.Unmarshal(e.Value(), &rec)
			fmt.Fprintf(&b, "; record %s: %s at rev %d, attempt %d\n", tok, rec.State, e.Revision(), rec.Attempt)
		}
	}
	return b.String()
}

func history(revs []*revision) string {
	var s []string
	for _, r := range revs {
		s = append(s, r.String())
	}
	return "[" + strings.Join(s, "; ") + "]"
}

// deadLetters counts the dead letters of each job.
func deadLetters(t *testing.T, js jetstream.JetStream, q string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "WORKQ_"+q+"_DEAD")
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	out := map[string]int{}
	for seq := st.FirstSeq; st.Msgs > 0 && seq <= st.LastSeq; seq++ {
		// Each read retries until the deadline: right after a leader kill the stream
		// may have no leader to answer for a moment.
		for {
			m, err := s.GetMsg(ctx, seq)
			if err == nil {
				out[m.Header.Get("Workq-Job-Id")]++
				break
			}
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("read dead letter at sequence %d (of %d–%d): %v", seq, st.FirstSeq, st.LastSeq, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return out
}

// pausesAround measures, for each window, how long commits stopped: the longest gap
// between consecutive commits that ends after the kill and starts before the window
// closed (the cluster had its new leader and every replica back), and when the first
// commit after that gap landed.
func pausesAround(o *observer, windows []window) []string {
	o.mu.Lock()
	var commits []time.Time
	for _, r := range o.revs {
		if r.rec.State == "done" {
			commits = append(commits, r.at)
		}
	}
	o.mu.Unlock()
	slices.SortFunc(commits, func(a, b time.Time) int { return a.Compare(b) })
	var out []string
	for _, w := range windows {
		var gap time.Duration
		var from, to time.Time
		for i := 1; i < len(commits); i++ {
			if commits[i].After(w.from) && commits[i-1].Before(w.to) && commits[i].Sub(commits[i-1]) > gap {
				gap, from, to = commits[i].Sub(commits[i-1]), commits[i-1], commits[i]
			}
		}
		if gap == 0 {
			out = append(out, w.what+": no commits around it")
			continue
		}
		out = append(out, fmt.Sprintf("%s: no commit for %s (from %s to %s after the kill)",
			w.what, gap.Round(time.Millisecond), from.Sub(w.from).Round(time.Millisecond), to.Sub(w.from).Round(time.Millisecond)))
	}
	return out
}

func (f figures) String() string {
	s := fmt.Sprintf("jobs %d: done %d, dead %d (dead letters %d)\n", f.jobs, f.done, f.dead, f.deadLetters)
	s += fmt.Sprintf("record revisions %d (heard live %d, read back %d, overwritten unheard in kill windows %d)\n", f.revisions+f.unobserved, f.revisions-f.readBack, f.readBack, f.unobserved)
	s += fmt.Sprintf("stale commits refused (\"was reassigned\" in worker logs): %d\n", f.reassigned)
	s += fmt.Sprintf("command runs %d for %d jobs: %d duplicate runs beyond the planned ones; highest attempt %d\n", f.runs, f.jobsRan, f.extraRuns, f.maxAttempt)
	s += fmt.Sprintf("runs started after their record was terminal: %d\n", f.afterEnd)
	for _, p := range f.pauses {
		s += "pause after " + p + "\n"
	}
	return s
}

// distinctRuns checks that what's runs (one job's, or one task's) each have a
// fencing token and an attempt of their own, notes the highest attempt in f, and
// returns the runs by token.
func distinctRuns(t *testing.T, what string, runs []run, f *figures, desc func() string) map[uint64]run {
	t.Helper()
	tokens, attempts := map[uint64]run{}, map[int]bool{}
	for _, r := range runs {
		if _, ok := tokens[r.token]; ok {
			t.Errorf("VIOLATION: %s: two runs with fencing token %d; %s", what, r.token, desc())
		}
		if attempts[r.attempt] {
			t.Errorf("VIOLATION (attempt not counted): %s: two runs as attempt %d; %s", what, r.attempt, desc())
		}
		tokens[r.token], attempts[r.attempt] = r, true
		f.maxAttempt = max(f.maxAttempt, r.attempt)
	}
	return tokens
}
