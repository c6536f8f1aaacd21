package consumer

import (
	"fmt"
	"sync"

	"github.com/workq/workq/internal/record"
)

// aheadClaims remembers, per job, a claim that a delivery found ahead of it — a
// record saying a delivery at least as late as this one (or a newer consumer
// incarnation) holds the job — so that a later delivery of the same message can tell
// whether that claim is alive.
//
// Such a claim is normal for a delivery buffered while a newer one of the same message
// went to another worker: this delivery is stale and does nothing. But a claim that
// stays ahead of the server's own count cannot be a live run of this consumer: a claim
// another client wrote (delivery 1000000), or one left over from before a server
// forgot its deliveries. Left alone, it would hold the job for ever: each delivery
// would find it ahead, do nothing, and come back after AckWait. So when a later
// delivery of the same message finds the very claim an earlier one found ahead (the
// same record revision), nobody has touched the record for a whole redelivery, and no
// run heartbeated the message (heartbeats keep it from being redelivered): the job is
// taken over as from a dead run. A run that was still going loses its claim to the
// compare-and-set, as any stalled run does.
type aheadClaims struct {
	mu   sync.Mutex
	seen map[string]aheadClaim // by job id
}

// aheadClaim is a claim found ahead of a delivery: the message, the record's revision,
// and the delivery that found it.
type aheadClaim struct {
	seq, rev, delivery uint64
}

// maxAheadClaims bounds the memory: past it, what is remembered is forgotten (a
// forgotten claim is remembered again by the next delivery that finds it).
const maxAheadClaims = 4096

// seenBefore reports whether an earlier delivery of j's message found prev, the same
// claim by revision, ahead of it; otherwise it remembers that j found it.
func (a *aheadClaims) seenBefore(j *Job, prev *record.Record) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, ok := a.seen[j.id]
	if ok && m.seq == j.md.Sequence.Stream && m.rev == prev.Revision && m.delivery < j.md.NumDelivered {
		delete(a.seen, j.id)
		return true
	}
	if a.seen == nil || len(a.seen) >= maxAheadClaims {
		a.seen = map[string]aheadClaim{}
	}
	a.seen[j.id] = aheadClaim{seq: j.md.Sequence.Stream, rev: prev.Revision, delivery: j.md.NumDelivered}
	return false
}

// takeOverAhead decides whether delivery j, which found prev's claim ahead of it, takes
// the job over (see aheadClaims), logging it when it does.
func (w *Worker) takeOverAhead(j *Job, prev *record.Record) bool {
	if !w.ahead.seenBefore(j, prev) {
		return false
	}
	w.log.Warn(fmt.Sprintf("job %s: its record claims delivery %d (consumer epoch %d), ahead of the server's delivery %d, and nobody touched it for a redelivery; taking the job over",
		j.id, prev.Delivery, prev.Epoch, j.md.NumDelivered),
		"job", j.id, "sequence", j.md.Sequence.Stream, "revision", prev.Revision)
	return true
}
