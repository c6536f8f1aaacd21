package jobid

import (
	"sort"
	"sync"
	"testing"
)

func TestEncodeKnownValues(t *testing.T) {
	t.Parallel()
	var zero [16]byte
	if got := encode(zero); got != "00000000000000000000000000" {
		t.Fatalf("encode(0) = %s", got)
	}
	var ones [16]byte
	for i := range ones {
		ones[i] = 0xff
	}
	// 2^128-1 in base32 is 7 followed by 25 Z's (the largest ULID).
	if got := encode(ones); got != "7ZZZZZZZZZZZZZZZZZZZZZZZZZ" {
		t.Fatalf("encode(max) = %s", got)
	}
	var one [16]byte
	one[15] = 1
	if got := encode(one); got != "00000000000000000000000001" {
		t.Fatalf("encode(1) = %s", got)
	}
}

func TestIDsAreUniqueAndSorted(t *testing.T) {
	t.Parallel()
	const n = 20000
	ids := make([]string, 0, n)
	seen := make(map[string]bool, n)
	for range n {
		id := New()
		if len(id) != 26 {
			t.Fatalf("id %q has %d characters", id, len(id))
		}
		if seen[id] {
			t.Fatalf("duplicate id %s", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatal("ids made one after another are not sorted")
	}
}

func TestClockStepBackStaysMonotonic(t *testing.T) {
	t.Parallel()
	a := newAt(2_000_000)
	b := newAt(1_000_000) // the clock went back
	if b <= a {
		t.Fatalf("id after a clock step back %s <= %s", b, a)
	}
}

func TestConcurrentUnique(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2000 {
				id := New()
				mu.Lock()
				if seen[id] {
					t.Errorf("duplicate %s", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
