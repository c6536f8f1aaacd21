package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/protocol"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
	"github.com/workq/workq/testenv"
)

// jsonStringLen counts what encoding/json writes for a string, escapes included.
func TestJSONStringLenMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "plain", `"quoted" \ back`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
		"<html> & </html>", "line\u2028sep\u2029para", "é ü 日本 🙂", "bad \xff\xfe utf8 \xc3", strings.Repeat("\xe6\x97", 3),
	} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonStringLen(s), len(b)-2; got != want {
			t.Errorf("jsonStringLen(%q) = %d, encoding/json writes %d", s, got, want)
		}
	}
}

// recordError keeps short texts as they are, and cuts long ones to maxRecordError
// bytes of JSON, between characters, with a marker saying how much was cut.
func TestRecordErrorBound(t *testing.T) {
	t.Parallel()
	if s := "boom: something failed\ngoroutine 1 [running]:"; recordError(s) != s {
		t.Fatalf("recordError changed a short text: %q", recordError(s))
	}
	exact := strings.Repeat("x", maxRecordError)
	if recordError(exact) != exact {
		t.Fatal("recordError cut a text of exactly maxRecordError bytes")
	}
	for name, s := range map[string]string{
		"one byte over": exact + "y",
		"a panic stack": "handler panicked: boom\n" + strings.Repeat("goroutine 7 [running]:\nmain.f()\n\t/src/main.go:12 +0x1d\n", 10000),
		"escapes":       strings.Repeat("<&>\"\n", 100000),
		"invalid utf-8": strings.Repeat("\xff", 100000),
		"multi-byte":    strings.Repeat("日本🙂", 100000),
	} {
		got := recordError(s)
		b, _ := json.Marshal(got)
		if n := len(b) - 2; n > maxRecordError {
			t.Errorf("%s: recordError's JSON takes %d bytes, want at most %d", name, n, maxRecordError)
		}
		if n := len(b) - 2; n < maxRecordError-64 {
			t.Errorf("%s: recordError's JSON takes %d bytes, want close to %d", name, n, maxRecordError)
		}
		i := strings.LastIndex(got, "… [")
		if i < 0 || !strings.HasPrefix(s, got[:i]) {
			t.Fatalf("%s: recordError = %.80q…, want a prefix of the text and a marker", name, got)
		}
		if want := "… [" + itoa(len(s)-i) + " bytes cut]"; got[i:] != want {
			t.Errorf("%s: marker %q, want %q", name, got[i:], want)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Errorf("%s: recordError cut a character", name)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A record with every field at its largest and a result of maxResultSize bytes fits
// the max payload with the headers of its KV write, for the default and other
// limits; and the limit is not needlessly small.
func TestMaxResultSizeFitsARecord(t *testing.T) {
	t.Parallel()
	for _, maxPayload := range []int64{1 << 20, 8 << 20, 64 << 10} {
		limit := maxResultSize(maxPayload)
		if low := int((maxPayload-34<<10)/4*3) - 3; limit < low {
			t.Errorf("maxResultSize(%d) = %d, want at least %d", maxPayload, limit, low)
		}
		at := time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(11*3600+59*60)))
		r := record.Record{
			// Every text at its longest, of the characters JSON escapes longest
			// ('<' is \u003c): any text is a job id, and any client sets the kind.
			ID: strings.Repeat("<", queue.MaxIDLen), Queue: strings.Repeat("q", 64), Kind: strings.Repeat("<", queue.MaxKindLen),
			State: record.Retrying, Attempt: math.MinInt64, MaxAttempts: math.MinInt64, LeaseMS: math.MinInt64, Sequence: math.MaxUint64, Enqueue: strings.Repeat("<", queue.MaxEnqueueLen), Run: strings.Repeat("r", 40),
			Worker:     &record.Worker{Name: strings.Repeat("<", recordWorkerRoom/12), Host: strings.Repeat("h", recordWorkerRoom/2), PID: math.MinInt64},
			EnqueuedAt: at, StartedAt: at, FinishedAt: at, RetryAt: at,
			LastError: recordError(strings.Repeat("<", 1<<20)),
			Errors:    slices.Repeat([]record.Failure{{Attempt: math.MinInt64, Started: at, At: at, Worker: cutText(strings.Repeat("<", 1<<10), maxHistoryWorker), Error: cutText(strings.Repeat("<", 1<<20), maxHistoryError)}}, record.MaxErrors),
			Result:    make([]byte, limit),
			StoredAt:  at, Ended: slices.Repeat([]string{strings.Repeat("<", queue.MaxEnqueueLen)}, protocol.MaxEnded),
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		h := nats.Header{"Nats-Expected-Last-Subject-Sequence": {"18446744073709551615"}, "Nats-TTL": {"86400s"}}
		if size := int64(queue.MsgSize(h, b)); size > maxPayload {
			t.Errorf("max payload %d: a record with a result of %d bytes takes %d", maxPayload, limit, size)
		}
	}
	if n := maxResultSize(int64(recordFieldsRoom + maxRecordError)); n != 0 {
		t.Errorf("maxResultSize with no room = %d, want 0", n)
	}
}

// The error of a result too large: permanent, and saying the sizes.
func TestResultTooLargeError(t *testing.T) {
	t.Parallel()
	err := resultTooLarge(1000, 750)
	if !IsPermanent(err) || !errors.Is(err, errResultTooLarge) {
		t.Fatalf("%v: want permanent and errResultTooLarge", err)
	}
	if got, want := errors.Unwrap(err).Error(), "result too large (1000 bytes, limit 750)"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
	if got, want := err.Error(), "permanent: result too large (1000 bytes, limit 750)"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
}

// checkResult lets a result of the connection's limit through and refuses one byte
// more with the permanent error.
//
// Not parallel: a paused internal test's goroutine runs package consumer's code, and
// the restart test's leak check counts those.
func TestCheckResult(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	ctx := testenv.Context(t, 20*time.Second)
	js := env.JetStream(t)
	w, err := New(ctx, js, "check", HandlerFunc(func(context.Context, *Job) error { return nil }),
		Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	limit := maxResultSize(js.Conn().MaxPayload())
	if w.maxResult() != limit || limit == 0 {
		t.Fatalf("maxResult %d, want maxResultSize(%d) = %d", w.maxResult(), js.Conn().MaxPayload(), limit)
	}
	if err := w.checkResult(&Job{result: make([]byte, limit)}); err != nil {
		t.Errorf("result at the limit: %v", err)
	}
	err = w.checkResult(&Job{result: make([]byte, limit+1)})
	if want := fmt.Sprintf("permanent: result too large (%d bytes, limit %d)", limit+1, limit); err == nil || err.Error() != want {
		t.Errorf("result one byte over: %v, want %q", err, want)
	}
}
