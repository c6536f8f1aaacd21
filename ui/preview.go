package ui

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"
)

// previewLimit is how much of a payload a page shows: 64 KiB of text, or 4 KiB as
// a hex dump (a line of 16 bytes is 78 characters).
const (
	previewLimit    = 64 << 10
	hexPreviewLimit = 4 << 10
)

// Preview is a payload as a page shows it.
type Preview struct {
	Format    string // "empty", "json", "text" or "binary"
	Text      string // pretty-printed JSON, the text, or a hex dump
	Size      int    // the payload's size
	Shown     int    // how many of its bytes Text shows
	Truncated bool
}

// preview renders a payload: JSON pretty-printed, UTF-8 text as it is, anything else
// as a hex dump; large payloads cut at previewLimit (hexPreviewLimit for binary).
func preview(b []byte) Preview {
	p := Preview{Size: len(b), Shown: len(b)}
	switch {
	case len(b) == 0:
		p.Format = "empty"
	case utf8.Valid(b) && printable(b):
		p.Format, p.Text = "text", string(b)
		var buf bytes.Buffer
		if json.Valid(b) && json.Indent(&buf, b, "", "  ") == nil {
			p.Format, p.Text = "json", buf.String()
		}
		if len(p.Text) > previewLimit {
			cut := previewLimit
			for cut > 0 && !utf8.RuneStart(p.Text[cut]) {
				cut--
			}
			p.Text, p.Truncated = p.Text[:cut], true
			if p.Format == "text" {
				p.Shown = cut
			} else {
				p.Shown = 0 // a part of the indented document, not of the payload
			}
		}
	default:
		p.Format = "binary"
		if len(b) > hexPreviewLimit {
			b, p.Truncated, p.Shown = b[:hexPreviewLimit], true, hexPreviewLimit
		}
		p.Text = hex.Dump(b)
	}
	return p
}

// printable reports whether text b has no control characters but tab, newline and
// carriage return.
func printable(b []byte) bool {
	for _, r := range string(b) {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return false
		}
	}
	return true
}
