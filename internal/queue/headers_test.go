package queue

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// HeaderSize counts what nats.go sends (and the server checks against max_payload):
// (*nats.Msg).Size is the subject, the encoded headers and the data.
func TestHeaderSizeMatchesNATS(t *testing.T) {
	t.Parallel()
	for _, h := range []nats.Header{
		nil,
		{},
		{"A": {"b"}},
		{HeaderID: {"job-1"}, HeaderKind: {"  padded  "}, "Multi": {"1", "22", ""}},
		{"Lines": {"one\r\ntwo"}, "Long": {strings.Repeat("x", 5000)}},
	} {
		m := &nats.Msg{Subject: "s", Header: h, Data: []byte("data")}
		if got, want := MsgSize(h, m.Data), m.Size()-len(m.Subject); got != want {
			t.Errorf("MsgSize(%v) = %d, nats.go counts %d", h, got, want)
		}
	}
}

// The reserve covers every line a dead letter adds at its largest.
func TestDeadLetterReserveCoversTheLines(t *testing.T) {
	t.Parallel()
	if deadLetterLines > DeadLetterReserve {
		t.Fatalf("dead-letter lines take up to %d bytes, DeadLetterReserve is %d", deadLetterLines, DeadLetterReserve)
	}
	if DeadLetterReserve-deadLetterLines > 128 {
		t.Errorf("DeadLetterReserve %d is far above the %d bytes it covers: update its doc", DeadLetterReserve, deadLetterLines)
	}
}
