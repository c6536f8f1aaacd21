package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// eventPrinter prints the demo's events between redraws of the progress bar.
type eventPrinter struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time // events are timed from here
	bar   *progress
}

// setBar sets the progress bar the events are printed between, nil for none.
func (p *eventPrinter) setBar(bar *progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bar = bar
}

func (p *eventPrinter) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.clear()
	}
	fmt.Fprintf(p.w, format, args...)
}

func (p *eventPrinter) event(icon, format string, args ...any) {
	p.printf("  %6.2fs  %s %s\n", time.Since(p.start).Seconds(), icon, fmt.Sprintf(format, args...))
}

// logger turns the workers' log lines about reassigned and dead jobs into events.
func (p *eventPrinter) logger() *slog.Logger { return slog.New(&eventHandler{p: p}) }

type eventHandler struct {
	p     *eventPrinter
	attrs []slog.Attr
}

func (h *eventHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *eventHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	for _, a := range h.attrs {
		attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	switch {
	case strings.HasSuffix(r.Message, "was reassigned"):
		h.p.event("✗", "%s: %s — its late commit is refused (another worker owns the job)", attrs["worker"], r.Message)
	case strings.HasSuffix(r.Message, "moved to dead letters"):
		h.p.event("☠", "%s: %s after %s attempts (%s)", attrs["worker"], r.Message, attrs["attempt"], attrs["err"])
	default:
		h.p.event("!", "%s: %s %v", attrs["worker"], r.Message, attrs)
	}
	return nil
}

func (h *eventHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &eventHandler{p: h.p, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *eventHandler) WithGroup(string) slog.Handler { return h }
