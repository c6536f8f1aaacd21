package kvlock

import "testing"

// Any value in a lock bucket — a foreign client's included — parses or is refused,
// never panics; an accepted record has a positive lease.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{`{"owner":"a","host":"h","pid":1,"lease_ms":1000,"id":"x"}`, `{}`, `{"lease_ms":-5}`, `null`, `[`, `{"lease_ms":1e400}`, `{"lease_ms":9223372036854775807}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := parseRecord(b)
		if ok && r.lease() <= 0 {
			t.Fatalf("parseRecord(%q) accepted a lease of %v", b, r.lease())
		}
	})
}

// Names map to keys one to one: a key made from a valid name decodes back to it, as
// a lock and as a semaphore slot; any other key decodes or is refused, never panics.
func FuzzLockKey(f *testing.F) {
	for _, s := range []string{"deploy", "a.b", "=", "=x", "ünï", "", "a b", "pool.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		decodeKey(s) // a foreign key: anything
		key, err := lockKey(kindLock, s)
		if err != nil {
			return
		}
		if name, kind, slot, ok := decodeKey(key); !ok || name != s || kind != kindLock || slot != -1 {
			t.Fatalf("lock %q: key %q decodes to %q %s %d %v", s, key, name, kind, slot, ok)
		}
		if name, kind, slot, ok := decodeKey(slotKey(key, 7)); !ok || name != s || kind != kindSemaphore || slot != 7 {
			t.Fatalf("semaphore %q: slot key decodes to %q %s %d %v", s, name, kind, slot, ok)
		}
	})
}
