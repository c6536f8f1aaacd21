package kvlock

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"math"
	"time"
)

// record is a lock's value in the bucket: a JSON document, so that any NATS client
// can read who holds a lock. It is written at grant time and re-published unchanged
// by every renewal; the lease is what waiters use to decide when a silent holder
// may be superseded.
type record struct {
	Owner    string    `json:"owner"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Acquired time.Time `json:"acquired"`
	LeaseMS  int64     `json:"lease_ms"`
	// ID is random per grant: after a renewal whose outcome was unknown (timeout),
	// the holder recognises its own value by it.
	ID string `json:"id"`
}

func (r record) lease() time.Duration { return time.Duration(r.LeaseMS) * time.Millisecond }

func (r record) holder(rev uint64) Holder {
	return Holder{Owner: r.Owner, Host: r.Host, PID: r.PID, Acquired: r.Acquired, Lease: r.lease(), Revision: rev}
}

// maxLeaseMS is the longest lease, in milliseconds, that a time.Duration holds.
const maxLeaseMS = math.MaxInt64 / int64(time.Millisecond)

// parseRecord reads a lock's value. A value that is not a record a holder writes —
// not JSON, or a lease that is not positive or does not fit a time.Duration — is
// refused: a waiter then gives the key its own lease before taking it over. (A lease
// that overflowed would read as negative, and a waiter would take the key over at
// once.)
func parseRecord(b []byte) (record, bool) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil || r.LeaseMS <= 0 || r.LeaseMS > maxLeaseMS {
		return record{}, false
	}
	return r, true
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// serverTTL is the per-message TTL given to the server: the lease rounded up to whole
// seconds (the server's granularity, minimum 1 s). It is never shorter than the
// lease, so the server never removes a lock its holder still believes valid.
func serverTTL(lease time.Duration) time.Duration {
	s := (lease + time.Second - 1) / time.Second
	if s < 1 {
		s = 1
	}
	return s * time.Second
}
