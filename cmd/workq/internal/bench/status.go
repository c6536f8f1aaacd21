package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// status is Run's progress line: which step of how many, the current phase and the
// time it has taken so far, redrawn in place every 250 ms. With no writer (Run's
// caller found no terminal) it is silent, so that pipes and CI logs stay clean.
type status struct {
	w     io.Writer // nil: silent
	total int

	mu    sync.Mutex
	n     int
	name  string
	ph    string
	since time.Time
	stop  chan struct{}
}

func newStatus(w io.Writer, total int) *status {
	s := &status{w: w, total: total}
	if s.w != nil {
		s.stop = make(chan struct{})
		go func() {
			t := time.NewTicker(250 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-s.stop:
					return
				case <-t.C:
					s.draw()
				}
			}
		}()
	}
	return s
}

// step starts the next step, named name.
func (s *status) step(name string) {
	s.mu.Lock()
	s.n++
	s.name, s.ph, s.since = name, "", time.Now()
	s.mu.Unlock()
	s.draw()
}

// phase names what a long step is doing now.
func (s *status) phase(p string) {
	s.mu.Lock()
	s.ph = p
	s.mu.Unlock()
	s.draw()
}

func (s *status) draw() {
	if s.w == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	line := fmt.Sprintf("[%d/%d] %s", s.n, s.total, s.name)
	if s.ph != "" {
		line += ": " + s.ph
	}
	line += fmt.Sprintf(" … %ds", int(time.Since(s.since).Seconds()))
	fmt.Fprintf(s.w, "\r\x1b[2K%s", strings.TrimSpace(line))
}

// clear stops the redrawing and erases the line.
func (s *status) clear() {
	if s.w == nil {
		return
	}
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprint(s.w, "\r\x1b[2K")
}
