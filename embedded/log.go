package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// serverLog is the logger set on every nats-server: it passes lines on to the
// Logger option's slog.Logger, if any, and keeps the first fatal error, which
// nats-server only logs (its own logger would then exit the process): a client port
// already taken, a JetStream store that cannot be opened. Run reports it.
type serverLog struct {
	l *slog.Logger // nil: lines are dropped

	mu    sync.Mutex
	fatal error
}

func (g *serverLog) Noticef(format string, v ...any) { g.log(slog.LevelInfo, format, v) }
func (g *serverLog) Warnf(format string, v ...any)   { g.log(slog.LevelWarn, format, v) }
func (g *serverLog) Errorf(format string, v ...any)  { g.log(slog.LevelError, format, v) }
func (g *serverLog) Debugf(format string, v ...any)  { g.log(slog.LevelDebug, format, v) }
func (g *serverLog) Tracef(format string, v ...any)  { g.log(LevelTrace, format, v) }

func (g *serverLog) Fatalf(format string, v ...any) {
	err := &fatalError{msg: fmt.Sprintf(format, v...)}
	for _, a := range v {
		if e, ok := a.(error); ok {
			err.err = e
			break
		}
	}
	g.mu.Lock()
	if g.fatal == nil {
		g.fatal = err
	}
	g.mu.Unlock()
	g.log(slog.LevelError, format, v)
}

func (g *serverLog) log(level slog.Level, format string, v []any) {
	if g.l == nil || !g.l.Enabled(context.Background(), level) {
		return
	}
	g.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
}

// enabled says whether the server should produce lines at level at all (debug and
// trace lines cost the server work).
func (g *serverLog) enabled(level slog.Level) bool {
	return g.l != nil && g.l.Enabled(context.Background(), level)
}

// fatalErr is the first fatal error the server logged, or nil.
func (g *serverLog) fatalErr() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fatal
}

// fatalError is a fatal line of nats-server's log, wrapping the error it was about
// (if its arguments held one), so that errors.Is finds, say, syscall.EADDRINUSE.
type fatalError struct {
	msg string
	err error
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.err }
