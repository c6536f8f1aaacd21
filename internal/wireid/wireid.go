// Package wireid maps job ids and unique keys, any text a user has (an e-mail
// address, a URL, a name with spaces), to the tokens the engine takes in subjects, KV
// keys and message-id headers, and back.
//
// KV keys allow only letters, digits and -/_=. (and no leading, trailing or doubled
// '.'). An id made of those, and not starting with Prefix, is its own token: the ids
// workq accepted before, and most generated ones, look the same on the wire as they
// do to their users. Any other id is Prefix followed by its bytes in unpadded
// URL-safe base64, which uses only allowed characters. The two forms cannot meet:
// a plain token never starts with Prefix, so the mapping is one to one and Decode
// undoes Encode.
package wireid

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Prefix starts the token of an id that is not a token as it is.
const Prefix = "=="

// MaxLen bounds an id or key as its user gives it, in bytes of UTF-8.
const MaxLen = 200

// MaxTokenLen bounds a token: an id of MaxLen bytes, encoded (unpadded base64 takes
// 4 characters for 3 bytes, rounded up).
const MaxTokenLen = len(Prefix) + (MaxLen*8+5)/6

var enc = base64.RawURLEncoding

// Check checks an id or key as its user gives it: 1 to MaxLen bytes of UTF-8 with
// no control characters (they would hide in listings and logs). what names it in
// the error ("job id", "unique key").
func Check(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > MaxLen:
		return fmt.Errorf("%s %.20q… is %d bytes, longer than %d", what, s, len(s), MaxLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s %q is not valid UTF-8", what, s)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s %q has the control character %U at byte %d", what, s, r, i)
		}
	}
	return nil
}

// Encode is id's token.
func Encode(id string) string {
	if Plain(id) && !strings.HasPrefix(id, Prefix) {
		return id
	}
	return Prefix + enc.EncodeToString([]byte(id))
}

// Decode is the id whose token is tok; ok is false if tok is no token Encode makes
// (a subject or key written by another client).
func Decode(tok string) (id string, ok bool) {
	if !Plain(tok) {
		return "", false
	}
	rest, encoded := strings.CutPrefix(tok, Prefix)
	if !encoded {
		if len(tok) > MaxLen {
			return "", false // longer than an id may be
		}
		return tok, true
	}
	b, err := enc.DecodeString(rest)
	if err != nil {
		return "", false
	}
	id = string(b)
	if Check("id", id) != nil || Encode(id) != tok {
		return "", false
	}
	return id, true
}

// Plain reports whether s is a KV key and subject token as it is: 1 or more of
// [A-Za-z0-9_=/.-], no leading, trailing or doubled '.'.
func Plain(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '=' || c == '/' || c == '.') {
			return false
		}
	}
	return true
}
