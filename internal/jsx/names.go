package jsx

import (
	"errors"
	"fmt"
)

// ErrInvalidName is the cause of every rejected queue, lock or job name.
var ErrInvalidName = errors.New("invalid name")

// MaxNameLen bounds queue names so derived stream and bucket names stay well inside
// the server's limits.
const MaxNameLen = 64

// CheckName checks a queue (or similar) name: 1 to MaxNameLen characters of
// [A-Za-z0-9_-]. what names the thing in the error ("queue", "limiter").
func CheckName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: %s name is empty", ErrInvalidName, what)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w: %s name %q is longer than %d characters", ErrInvalidName, what, name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !isNameByte(name[i]) {
			return fmt.Errorf("%w: %s name %q has %q at offset %d; use only letters, digits, '_' and '-'",
				ErrInvalidName, what, name, rune(name[i]), i)
		}
	}
	return nil
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
