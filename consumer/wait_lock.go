package consumer

import "sync"

// waitLock is a mutex whose waiters wait on a channel. A job's lock is held across
// a record write's round trip (writeClaim), so a goroutine waiting for it is waiting
// on the engine. To Go's testing/synctest, which runs the simulation of the worker on
// a virtual clock (internal/sim), a goroutine blocked on a channel is blocked and the
// clock may move on to the write's timeout; one blocked on a sync.Mutex is running,
// and the clock would stand still for ever while the write waits for a server that
// is down. Uncontended, it costs a channel operation where a sync.Mutex costs an
// atomic one: nothing beside the round trip it guards. The zero value is unlocked.
type waitLock struct {
	once sync.Once
	ch   chan struct{}
}

func (l *waitLock) Lock()   { l.slot() <- struct{}{} }
func (l *waitLock) Unlock() { <-l.slot() }

func (l *waitLock) slot() chan struct{} {
	l.once.Do(func() { l.ch = make(chan struct{}, 1) })
	return l.ch
}
