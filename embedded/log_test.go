package embedded_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/workq/workq/embedded"
)

// records is a slog.Handler keeping every record it is given, enabled from level. It
// counts the questions about levels below that: each is a line the server produced
// (formatted, passed on) only for the logger to drop it.
type records struct {
	level slog.Level
	attrs []slog.Attr

	mu      *sync.Mutex
	seen    *[]slog.Record
	refused *atomic.Int64
}

func newRecords(level slog.Level) *records {
	return &records{level: level, mu: &sync.Mutex{}, seen: &[]slog.Record{}, refused: &atomic.Int64{}}
}

func (h *records) Enabled(_ context.Context, l slog.Level) bool {
	if l < h.level {
		h.refused.Add(1)
	}
	return l >= h.level
}

func (h *records) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.seen = append(*h.seen, r)
	return nil
}

func (h *records) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *records) WithGroup(string) slog.Handler { return h }

// find returns the first record whose message contains msg.
func (h *records) find(msg string) (slog.Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range *h.seen {
		if strings.Contains(r.Message, msg) {
			return r, true
		}
	}
	return slog.Record{}, false
}

func (h *records) minLevel() slog.Level {
	h.mu.Lock()
	defer h.mu.Unlock()
	lowest := slog.LevelError + 1
	for _, r := range *h.seen {
		lowest = min(lowest, r.Level)
	}
	return lowest
}

func TestLogger(t *testing.T) {
	t.Parallel()
	t.Run("info", func(t *testing.T) {
		h := newRecords(slog.LevelInfo)
		run(t, embedded.Logger(slog.New(h)), embedded.TmpfsStore())
		r, ok := h.find("Server is ready")
		if !ok || r.Level != slog.LevelInfo {
			t.Fatalf("no Info record %q (found %v, level %s)", "Server is ready", ok, r.Level)
		}
		// Debug and trace stay off in the server (they cost it work): the logger is
		// asked about them only when the server starts (whether to turn them on).
		if n := h.refused.Load(); n > 2 {
			t.Fatalf("the server produced %d debug or trace lines for a logger enabled from Info", n-2)
		}
	})
	t.Run("trace", func(t *testing.T) {
		h := newRecords(embedded.LevelTrace)
		s := run(t, embedded.Logger(slog.New(h)), embedded.TmpfsStore())
		// A client's CONNECT is traced.
		nc := jetStream(t, s.URL()).Conn()
		nc.Close()
		if _, ok := h.find("CONNECT"); !ok || h.minLevel() != embedded.LevelTrace {
			t.Fatalf("no trace of the client's CONNECT (lowest level seen %s)", h.minLevel())
		}
	})
	t.Run("cluster nodes say which", func(t *testing.T) {
		h := newRecords(slog.LevelInfo)
		cl, err := embedded.RunCluster(2, embedded.Logger(slog.New(h)), embedded.TmpfsStore())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		r, ok := h.find("Server is ready")
		server := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "server" {
				server = a.Value.String()
			}
			return true
		})
		if !ok || !strings.HasPrefix(server, "workq-n") {
			t.Fatalf("record %q: server attribute %q, want workq-n<i>", r.Message, server)
		}
	})
}

func TestLogWriter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "server.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run(t, embedded.LogWriter(f), embedded.TmpfsStore())
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), `level=INFO msg="Server is ready"`) {
		t.Fatalf("log written (%v):\n%s\nwant an Info line saying the server is ready", err, b)
	}
}
