package wireid

import (
	"strings"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id, tok string
	}{
		{"mail-1", "mail-1"},
		{"a/b=c.d_e", "a/b=c.d_e"},
		{"user@example.com", "==dXNlckBleGFtcGxlLmNvbQ"},
		{"two words", "==dHdvIHdvcmRz"},
		{"==looks-encoded", "==PT1sb29rcy1lbmNvZGVk"}, // a plain id that starts with Prefix is encoded
		{"a..b", "==YS4uYg"},
		{".a", "==LmE"},
		{"é", "==w6k"},
		{"*", "==Kg"},
		{">", "==Pg"},
	} {
		if got := Encode(tc.id); got != tc.tok {
			t.Errorf("Encode(%q) = %q, want %q", tc.id, got, tc.tok)
		}
		if !Plain(tc.tok) {
			t.Errorf("token %q of %q is not plain", tc.tok, tc.id)
		}
		if got, ok := Decode(tc.tok); !ok || got != tc.id {
			t.Errorf("Decode(%q) = %q, %v; want %q", tc.tok, got, ok, tc.id)
		}
	}
	for _, tok := range []string{"", "a b", "==", "==!!", "==bWFpbC0x" /* "mail-1": not Encode's */, "==AA" /* NUL */, "a..b",
		strings.Repeat("T", MaxLen+1) /* plain, but longer than an id (the fuzzer's find) */} {
		if id, ok := Decode(tok); ok {
			t.Errorf("Decode(%q) = %q, true; want not a token", tok, id)
		}
	}
	if MaxTokenLen != len(Prefix)+enc.EncodedLen(MaxLen) {
		t.Errorf("MaxTokenLen %d, want %d", MaxTokenLen, len(Prefix)+enc.EncodedLen(MaxLen))
	}
	if n := len(Encode(strings.Repeat("é", MaxLen/2))); n != MaxTokenLen {
		t.Errorf("token of %d bytes of a %d-byte id, want MaxTokenLen %d", n, MaxLen, MaxTokenLen)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"x", "user@example.com", "two words", strings.Repeat("a", MaxLen), "日本"} {
		if err := Check("job id", ok); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"":                            "empty",
		strings.Repeat("a", MaxLen+1): "longer than 200",
		"a\nb":                        "control character U+000A",
		"\xff":                        "not valid UTF-8",
	} {
		if err := Check("job id", bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want %q", bad, err, want)
		}
	}
}

// Every id that Check accepts has a plain token that decodes back to it, and every
// token decodes to at most one id.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"mail-1", "user@example.com", "==x", "a..b", "", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if Check("id", s) == nil {
			tok := Encode(s)
			if !Plain(tok) || len(tok) > MaxTokenLen {
				t.Fatalf("Encode(%q) = %q", s, tok)
			}
			if id, ok := Decode(tok); !ok || id != s {
				t.Fatalf("Decode(Encode(%q)) = %q, %v", s, id, ok)
			}
		}
		if id, ok := Decode(s); ok && (Encode(id) != s || Check("id", id) != nil) {
			t.Fatalf("Decode(%q) = %q, whose token is %q (check: %v)", s, id, Encode(id), Check("id", id))
		}
	})
}
