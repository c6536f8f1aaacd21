package kvlock

import (
	"fmt"
	"strconv"
	"strings"
)

// target is what a caller competes for: the key of a lock, or the n slot keys of a
// semaphore.
type target struct {
	kind   string
	name   string
	keys   []string
	filter string // watch filter covering every key
}

func newLockTarget(name string) (*target, error) {
	key, err := lockKey(kindLock, name)
	if err != nil {
		return nil, err
	}
	return &target{kind: kindLock, name: name, keys: []string{key}, filter: key}, nil
}

// slot maps a watched key to its slot index, or -1.
func (tg *target) slot(key string) int {
	if len(tg.keys) == 1 {
		if key == tg.keys[0] {
			return 0
		}
		return -1
	}
	dot := strings.LastIndexByte(key, '.')
	if dot < 0 {
		return -1
	}
	i, err := strconv.Atoi(key[dot+1:])
	if err != nil || i < 0 || i >= len(tg.keys) || tg.keys[i] != key {
		return -1
	}
	return i
}

func (tg *target) errorf(op string, err error) error {
	return fmt.Errorf("kvlock: %s %s %q: %w", op, tg.kind, tg.name, err)
}

// holders lists who holds the slots in states, as far as they are known.
func holders(states []slotState) []Holder {
	var hs []Holder
	for _, st := range states {
		if st.known && !st.free && st.recOK {
			hs = append(hs, st.rec.holder(st.rev))
		}
	}
	return hs
}
