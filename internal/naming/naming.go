// Package naming checks the names users give queues, limiters and the like, so
// that every derived stream, bucket and subject name stays valid and within the
// server's limits.
package naming

import (
	"errors"
	"fmt"
)

// ErrInvalid is the cause of every rejected queue, lock or job name.
var ErrInvalid = errors.New("invalid name")

// MaxLen bounds queue names so derived stream and bucket names stay well inside
// the server's limits.
const MaxLen = 64

// Check checks a queue (or similar) name: 1 to MaxLen characters of
// [A-Za-z0-9_-]. what names the thing in the error ("queue", "limiter").
func Check(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: %s name is empty", ErrInvalid, what)
	}
	if len(name) > MaxLen {
		return fmt.Errorf("%w: %s name %q is longer than %d characters", ErrInvalid, what, name, MaxLen)
	}
	for i := 0; i < len(name); i++ {
		if !isNameByte(name[i]) {
			return fmt.Errorf("%w: %s name %q has %q at offset %d; use only letters, digits, '_' and '-'",
				ErrInvalid, what, name, rune(name[i]), i)
		}
	}
	return nil
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
