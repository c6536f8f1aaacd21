package ui

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// ErrInvalidOption: an Option was given a value it cannot take.
var ErrInvalidOption = errors.New("invalid option")

// Option configures New.
type Option func(*config) error

type config struct {
	prefix      string
	readOnly    bool
	token       string
	user        string
	password    string
	refresh     time.Duration
	timeout     time.Duration
	sampleEvery time.Duration
	logger      *slog.Logger
}

func defaultConfig() config {
	return config{refresh: 2 * time.Second, timeout: 10 * time.Second, sampleEvery: DefaultSampleEvery, logger: slog.New(slog.DiscardHandler)}
}

// Prefix is the path the handler is mounted at, such as "/workq"; default "" (the
// root). The handler expects requests with the prefix still on their path (do not
// wrap it in http.StripPrefix), and its links carry it.
func Prefix(p string) Option {
	return func(c *config) error {
		p = strings.TrimSuffix(p, "/")
		if p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?#\"'<> ")) {
			return fmt.Errorf("ui: prefix %q: want a path such as /workq: %w", p, ErrInvalidOption)
		}
		c.prefix = p
		return nil
	}
}

// ReadOnly hides every action (pause, cancel, requeue, purge, schedule changes) and
// refuses their requests with 403 Forbidden; default off.
func ReadOnly() Option { return func(c *config) error { c.readOnly = true; return nil } }

// Token puts the dashboard behind a secret token: a request must carry it as
// "Authorization: Bearer <token>", or come from a browser that entered it on the
// login page (which sets a cookie derived from it). Default: no token. An empty
// token is refused, so that a missing environment variable does not open the
// dashboard by accident.
func Token(token string) Option {
	return func(c *config) error {
		if token == "" {
			return fmt.Errorf("ui: empty token: %w", ErrInvalidOption)
		}
		c.token = token
		return nil
	}
}

// BasicAuth puts the dashboard behind HTTP basic authentication with one user and
// password. Default: none. With Token too, either is accepted.
func BasicAuth(user, password string) Option {
	return func(c *config) error {
		if user == "" || password == "" || strings.Contains(user, ":") {
			return fmt.Errorf("ui: basic auth: want a user (without ':') and a password: %w", ErrInvalidOption)
		}
		c.user, c.password = user, password
		return nil
	}
}

// Refresh is how often open queue pages update their numbers in place; default 2 s,
// at least 500 ms. Each refresh reads the queues' state from the server.
func Refresh(d time.Duration) Option {
	return func(c *config) error {
		if d < 500*time.Millisecond {
			return fmt.Errorf("ui: refresh %s: want at least 500ms: %w", d, ErrInvalidOption)
		}
		c.refresh = d
		return nil
	}
}

// Timeout bounds how long a page or an action waits for the NATS server; default
// 10 s. Past it the page says the server did not answer (504) rather than hang while
// the server is down or electing a leader.
func Timeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("ui: timeout %s: want more than 0: %w", d, ErrInvalidOption)
		}
		c.timeout = d
		return nil
	}
}

// DefaultSampleEvery is SampleEvery's default.
const DefaultSampleEvery = 5 * time.Second

// minSampleEvery is the shortest interval SampleEvery takes.
const minSampleEvery = 100 * time.Millisecond

// SampleEvery is how often the dashboard reads every queue's state in the
// background for its charts (the history of each queue's flow, depths and oldest
// job); default DefaultSampleEvery, 5 s, at least 100 ms. A reading costs
// the server what a refresh of the queues page does (about 6 requests per queue),
// and 5 s draws an hour (the 720 intervals a chart spans) in enough detail at
// that cost. A shorter interval draws a shorter span, in the same memory.
func SampleEvery(d time.Duration) Option {
	return func(c *config) error {
		if d < minSampleEvery {
			return fmt.Errorf("ui: sample every %s: want at least %s: %w", d, minSampleEvery, ErrInvalidOption)
		}
		c.sampleEvery = d
		return nil
	}
}

// Logger receives the failed requests and the actions taken (who, what, on which
// queue); default: discarded.
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("ui: nil logger: %w", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}
