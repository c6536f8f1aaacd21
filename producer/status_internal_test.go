package producer

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
)

// jobLife is one job moving through its stages as the engine and a worker move it,
// each stage written before the one before it goes: scheduled (its delayed message),
// queued (its message on a level's subject), claimed (its record, the message still
// there), done (its record; the message acked).
type jobLife struct {
	stage   int // 0 scheduled, 1 queued, 2 claimed, 3 done
	subject string
	names   queue.Names
	id      string
}

func (j *jobLife) record() (*record.Record, error) {
	if j.stage < 2 {
		return nil, record.ErrNotFound
	}
	return &record.Record{ID: j.id}, nil
}

func (j *jobLife) msg(subject string) (*jetstream.RawStreamMsg, error) {
	switch {
	case j.stage == 0 && subject == j.names.DelayedSubject(j.id),
		(j.stage == 1 || j.stage == 2) && subject == j.subject:
		return &jetstream.RawStreamMsg{Subject: subject}, nil
	}
	return nil, jetstream.ErrMsgNotFound
}

// locate finds a job that exists whatever it does between locate's reads: every way
// of moving a job on through its life, by up to three stages at a time before any
// read, for a delayed job and a queued one, at the normal level and a higher one. It
// reported not found when a job fired between the reads of its level's subject and
// its delayed subject, and then ran to its end between two later reads.
func TestLocateSeesAJobMovingOnBetweenReads(t *testing.T) {
	t.Parallel()
	names, err := queue.NamesFor("q")
	if err != nil {
		t.Fatal(err)
	}
	const id = "j"
	var schedules [][]int // how many stages the job moves on before each read
	var gen func(prefix []int, left int)
	gen = func(prefix []int, left int) {
		if len(prefix) == 12 {
			schedules = append(schedules, append([]int(nil), prefix...))
			return
		}
		for a := 0; a <= left; a++ {
			gen(append(prefix, a), left-a)
		}
	}
	gen(nil, 3)
	for _, start := range []int{0, 1} {
		for _, subject := range []string{names.JobSubject(id), names.LevelJobSubject(queue.PriorityHigh, id)} {
			for _, sched := range schedules {
				j := &jobLife{stage: start, subject: subject, names: names, id: id}
				reads := 0
				step := func() {
					if reads < len(sched) {
						j.stage = min(j.stage+sched[reads], 3)
					}
					reads++
				}
				rec, msg, err := locate(id, names.JobSubjects(id),
					func() (*record.Record, error) { step(); return j.record() },
					func(s string) (*jetstream.RawStreamMsg, error) { step(); return j.msg(s) })
				if err != nil || (rec == nil && msg == nil) {
					t.Fatalf("from stage %d on %s, moving on %v before its reads: %v, %v, %v; want the job found",
						start, subject, sched[:min(reads, len(sched))], rec, msg, err)
				}
			}
		}
	}
	if len(schedules) != 455 { // C(15, 3): 12 reads, up to 3 stages
		t.Fatalf("%d schedules", len(schedules))
	}
}
