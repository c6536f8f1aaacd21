package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// limitedBuffer keeps up to max bytes and notes that more came.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		b.over = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// lastLine is the last non-empty line, trimmed to 200 characters.
func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	return truncate(strings.TrimSpace(lines[len(lines)-1]), 200)
}

// lineWriter writes whole lines atomically to w, so the output of concurrent
// commands and log lines does not interleave mid-line.
type lineWriter struct {
	w   io.Writer
	buf []byte
}

var outputMu sync.Mutex

func (l *lineWriter) Write(p []byte) (int, error) {
	outputMu.Lock()
	defer outputMu.Unlock()
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		_, err := l.w.Write(l.buf[:i+1])
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
		if err != nil {
			return len(p), nil // stderr gone: do not fail the job for it
		}
	}
	if len(l.buf) > 64<<10 {
		_, _ = l.w.Write(l.buf)
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

// flush writes what is left of a last line without a newline.
func (l *lineWriter) flush() {
	outputMu.Lock()
	defer outputMu.Unlock()
	if len(l.buf) > 0 {
		_, _ = l.w.Write(append(l.buf, '\n'))
		l.buf = l.buf[:0]
	}
}
