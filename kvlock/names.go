package kvlock

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxNameLen bounds lock and semaphore names (in bytes) so keys stay well inside the
// server's subject limits.
const MaxNameLen = 512

// lockKey maps a lock or semaphore name to a single-token KV key. Any non-empty
// string of at most MaxNameLen bytes is a valid name: a name made only of
// [A-Za-z0-9_-] is its own key, so keys stay readable in `nats kv` tools; any
// other name is encoded as "=" followed by its unpadded base64url encoding. '=' never
// appears in a plain name, so the mapping is one-to-one.
func lockKey(kind, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%s name is empty: %w", kind, ErrInvalidName)
	}
	if len(name) > MaxNameLen {
		return "", fmt.Errorf("%s name %q… is %d bytes, longer than %d: %w",
			kind, truncate(name, 32), len(name), MaxNameLen, ErrInvalidName)
	}
	for i := 0; i < len(name); i++ {
		if !plainByte(name[i]) {
			return "=" + base64.RawURLEncoding.EncodeToString([]byte(name)), nil
		}
	}
	return name, nil
}

// slotKey is the key of slot i of a semaphore whose key is key: a second token, so
// slot keys never collide with plain lock keys and one wildcard watches them all.
func slotKey(key string, i int) string { return key + "." + strconv.Itoa(i) }

func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
