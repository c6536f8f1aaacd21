//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A single nats-server SIGKILLed and restarted on its store (sync always) can come
// back with a WorkQueue stream that still holds a message its consumer has acked:
// the consumer's ack floor is past the message, so it is never delivered again, but
// the removal that the ack makes was lost with the server. Seen here (nats-server
// v2.15.2, TestChaosGroupCommitServerKill, about 1 run in 15 under load): job
// g-00643's record said done, its message seq 644 stayed in WORKQ_gc below the
// consumer's ack floor 3256, with nothing pending. The job ended; its message is
// litter the engine left, not a job workq lost. Workers now sweep such messages once
// their pulls work again after a failure (consumer/orphans.go, tested on its own in
// TestWorkerSweepsFinishedJobsBelowAckFloor); orphans tells one the check meets
// before a sweep got to it from the jobs still in the stream: below the ack floor of
// the workers' consumer, and their job's record ended (done or dead).

var orphanSeen sync.Map // test name and sequence → logged

// orphans returns the sequences of the messages of queue q's jobs stream s that the
// server left behind below the workers' ack floor, for jobs whose records ended, and
// logs each once.
func orphans(t *testing.T, js jetstream.JetStream, s jetstream.Stream, q string) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.Consumer(ctx, "workers")
	if err != nil {
		return nil
	}
	floor := c.CachedInfo().AckFloor.Stream
	st := s.CachedInfo().State
	kv, err := js.KeyValue(ctx, "WORKQ_"+q+"_JOBS")
	if err != nil {
		return nil
	}
	var out []uint64
	for seq := st.FirstSeq; seq <= min(floor, st.LastSeq) && uint64(len(out)) < st.Msgs; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue // removed: the usual case
		}
		id, ok := strings.CutPrefix(m.Subject, "workq."+q+".jobs.")
		if !ok {
			continue
		}
		e, err := kv.Get(ctx, id)
		if err != nil {
			continue
		}
		var rec struct {
			State string `json:"state"`
		}
		if json.Unmarshal(e.Value(), &rec) != nil || rec.State != "done" && rec.State != "dead" {
			continue
		}
		out = append(out, seq)
		if _, logged := orphanSeen.LoadOrStore(t.Name()+"/"+m.Subject, true); !logged {
			t.Logf("ENGINE: message %d (job %s, record %s) left in the stream below the workers' ack floor %d: "+
				"its ack's removal was lost with the server; it is never delivered again", seq, id, rec.State, floor)
		}
	}
	return out
}
