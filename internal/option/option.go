// Package option holds what the public packages' functional options share: the
// error every rejected option or argument wraps, and the form of its message, so
// that producer, consumer and kvlock reject bad input alike.
package option

import (
	"errors"
	"fmt"
	"log/slog"
)

// ErrInvalid is the cause of every rejected option (Replicas(9), AckWait(1ms), a
// nil Logger) and of every nil or out-of-range argument (a nil context, JetStream
// or handler, a semaphore of size 0). The public packages export it as
// ErrInvalidOption: one value, so errors.Is with any package's ErrInvalidOption
// answers for all of them.
var ErrInvalid = errors.New("invalid option or argument")

// Invalid is the error for an option given a value it does not take, naming both
// and saying what the option wants: "AckWait(1ms): want at least 100ms: invalid
// option or argument". A string value is quoted; pass a literal nil for a nil
// value.
func Invalid(option string, value any, want string) error {
	var v string
	switch x := value.(type) {
	case nil:
		v = "nil"
	case string:
		v = fmt.Sprintf("%q", x)
	default:
		v = fmt.Sprint(x)
	}
	return fmt.Errorf("%s(%s): want %s: %w", option, v, want, ErrInvalid)
}

// Nil is the error for a nil argument: "nil context: invalid option or argument".
func Nil(what string) error {
	return fmt.Errorf("nil %s: %w", what, ErrInvalid)
}

// CheckLogger refuses a nil logger given to a Logger option, saying how to discard
// logs instead.
func CheckLogger(l *slog.Logger) error {
	if l == nil {
		return Invalid("Logger", nil, "a logger; slog.New(slog.DiscardHandler) discards")
	}
	return nil
}
