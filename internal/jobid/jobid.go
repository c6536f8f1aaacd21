// Package jobid generates job ids that are unique and sort by creation time: 26
// characters of Crockford base32 over 48 bits of Unix milliseconds and 80 random
// bits (the ULID layout). Ids made in the same millisecond by one process increase
// monotonically, so they sort in the order they were made.
package jobid

import (
	"crypto/rand"
	"sync"
	"time"
)

const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var gen struct {
	sync.Mutex
	ms   uint64
	rand [10]byte
}

// New returns a new id.
func New() string {
	return newAt(uint64(time.Now().UnixMilli()))
}

func newAt(ms uint64) string {
	gen.Lock()
	if ms <= gen.ms {
		// Same (or an earlier, after a clock step) millisecond: keep the last time and
		// add one to the random part so ids stay strictly increasing.
		ms = gen.ms
		for i := len(gen.rand) - 1; i >= 0; i-- {
			gen.rand[i]++
			if gen.rand[i] != 0 {
				break
			}
		}
	} else {
		gen.ms = ms
		_, _ = rand.Read(gen.rand[:])
	}
	var b [16]byte
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	copy(b[6:], gen.rand[:])
	gen.Unlock()
	return encode(b)
}

// encode writes 128 bits as 26 base32 characters: the number is read as 130 bits with
// two leading zeros, five bits a character, so the first character carries 3 bits.
func encode(b [16]byte) string {
	var out [26]byte
	for i := range out {
		var v byte
		for p := i*5 - 2; p < i*5+3; p++ {
			v <<= 1
			if p >= 0 {
				v |= b[p/8] >> (7 - p%8) & 1
			}
		}
		out[i] = alphabet[v]
	}
	return string(out[:])
}
