package consumer

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/protocol"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/record"
)

// A job record is written as one message, which must fit the server's max payload
// (headers included): a record that cannot be written makes its job loop. The
// result and last_error are the only fields a handler controls, so both are bounded:
// last_error by maxRecordError, the result by maxResultSize, and every other field
// fits in recordFieldsRoom.

// maxRecordError bounds a record's last_error, counted as JSON-encoded bytes (quotes
// excluded): 8 KiB holds an error chain and the top of a panic's stack. recordError
// cuts longer texts.
const maxRecordError = 8 << 10

// The room a record keeps for its fields other than result and last_error, each at
// its largest, JSON-encoded. A text any client sets (the id, the kind, the enqueue)
// may be all characters that JSON writes as six bytes ('<' is \u003c).
const (
	jsonMaxEscape = len(`\u003c`)
	// recordKeysRoom: the keys, quotes, colons, commas and braces of every field
	// (about 200 bytes), result and last_error included.
	recordKeysRoom = 320
	// recordNamesRoom: id, queue and state.
	recordNamesRoom = jsonMaxEscape*queue.MaxIDLen + naming.MaxLen + len("retrying")
	// recordNumbersRoom: attempt, max_attempts, lease_ms, sequence and the worker's pid.
	recordNumbersRoom = 5 * len("-9223372036854775808")
	// recordTimesRoom: enqueued_at, started_at, finished_at and retry_at.
	recordTimesRoom = 4 * len("2006-01-02T15:04:05.999999999-07:00")
	// recordKindRoom: the kind, at most queue.MaxKindLen bytes (a job with a longer
	// one is dead-lettered before it runs).
	recordKindRoom = jsonMaxEscape * queue.MaxKindLen
	// recordWorkerRoom: the worker's name and host. The same holds for a longer name.
	recordWorkerRoom = 1024
	// recordRunRoom: the enqueue, at most queue.MaxEnqueueLen bytes (a job with a
	// longer one is dead-lettered before it runs), and the run id (about 25).
	recordRunRoom = jsonMaxEscape*queue.MaxEnqueueLen + 64
	// recordWriteRoom: the headers of the KV write ("NATS/1.0", the expected last
	// sequence of a compare-and-set, a per-key TTL): about 100 bytes.
	recordWriteRoom = 256
	// recordErrorsRoom: the history of failed attempts, each entry's keys, attempt,
	// start and end times, worker and error at their longest: about 11.5 KiB.
	recordErrorsRoom = record.MaxErrors * (64 + len("-9223372036854775808") + 2*len("2006-01-02T15:04:05.999999999-07:00") + maxHistoryWorker + maxHistoryError)
	// recordEndedRoom: the enqueues of the id that the record was of before, and the
	// store time of its own: about 6 KiB.
	recordEndedRoom = protocol.MaxEnded*(jsonMaxEscape*queue.MaxEnqueueLen+3) + len(`,"stored_at":"2006-01-02T15:04:05.999999999-07:00"`)
	// recordFieldsRoom is their sum: about 28 KiB.
	recordFieldsRoom = recordKeysRoom + recordNamesRoom + recordNumbersRoom + recordTimesRoom +
		recordKindRoom + recordWorkerRoom + recordRunRoom + recordWriteRoom + recordErrorsRoom + recordEndedRoom
)

// maxResultSize is the largest result (Job.SetResult) a job record can hold on a
// connection whose server takes maxPayload bytes per message: the room left by the
// other fields and a last_error of maxRecordError bytes, times 3/4 for base64 (4
// bytes of JSON per 3 of result). 0 if nothing fits. About 745 KiB at the default
// max payload of 1 MiB.
func maxResultSize(maxPayload int64) int {
	room := maxPayload - int64(recordFieldsRoom+maxRecordError)
	if room <= 0 {
		return 0
	}
	return int(room/4) * 3
}

// MaxResultSize is the largest result (Job.SetResult) a job record holds on a server
// whose max_payload is maxPayload: about (maxPayload − 30 KiB) × 3/4, 763 407 bytes at
// the default 1 MiB. The rest of the record (ids, kind, worker, times, the last error
// and the history of errors, each at its largest) takes the 30 KiB; the result is
// base64 in JSON. A handler that sets more is dead-lettered with a permanent error.
func MaxResultSize(maxPayload int64) int { return maxResultSize(maxPayload) }

// maxResult is maxResultSize for this worker's connection.
func (w *Worker) maxResult() int { return maxResultSize(w.js.Conn().MaxPayload()) }

// checkResult returns a permanent error if j's result cannot be stored in its record,
// nil otherwise. A job whose result does not fit must not be committed (its record
// could not be written, and the job would run again and again): it goes to dead
// letters at once.
func (w *Worker) checkResult(j *Job) error {
	if limit := w.maxResult() - taskRoom(j); len(j.result) > limit {
		return resultTooLarge(len(j.result), limit)
	}
	return nil
}

// errResultTooLarge is the cause of resultTooLarge's errors.
var errResultTooLarge = errors.New("result too large")

type resultTooLargeError struct{ n, limit int }

func (e resultTooLargeError) Error() string {
	return fmt.Sprintf("result too large (%d bytes, limit %d)", e.n, e.limit)
}

func (e resultTooLargeError) Is(target error) bool { return target == errResultTooLarge }

// resultTooLarge is the permanent error of a handler that set a result of n bytes
// where the record holds at most limit: "result too large (n bytes, limit limit)".
func resultTooLarge(n, limit int) error { return Permanent(resultTooLargeError{n, limit}) }

// recordError bounds an error text for a job record's last_error, so that a huge
// error or a panic's stack cannot make the record unwritable: a text whose JSON
// encoding takes more than maxRecordError bytes keeps its beginning (the error and
// the top of a stack), cut between characters, followed by a marker saying how many
// bytes were cut: "… [N bytes cut]".
func recordError(s string) string { return cutText(s, maxRecordError) }

// maxHistoryError bounds each error of a record's history of failed attempts
// (record.Failure), counted as recordError counts: 1 KiB holds an error chain; the
// last one is in last_error whole.
const maxHistoryError = 1 << 10

// maxHistoryWorker bounds the worker's name in each entry of the history, counted
// as maxHistoryError is: a name is short, and the last attempt's worker is whole in
// the record's worker field.
const maxHistoryWorker = 64

// failed records a failed attempt's error in next: its last_error, and one more
// entry of its history (the newest record.MaxErrors kept).
func failed(next *record.Record, attempt int, err error) {
	next.LastError = recordError(err.Error())
	f := record.Failure{Attempt: attempt, Started: next.StartedAt, At: time.Now(), Error: cutText(err.Error(), maxHistoryError)}
	if next.Worker != nil {
		f.Worker = cutText(next.Worker.Name, maxHistoryWorker)
	}
	next.AddFailure(f)
}

// cutText cuts s to at most limit bytes once JSON-encoded (quotes excluded), marking
// the cut with how many bytes went.
func cutText(s string, limit int) string {
	if jsonStringLen(s) <= limit {
		return s
	}
	// The marker's count is at most len(s): reserve room for that many digits.
	budget := limit - jsonStringLen(fmt.Sprintf("… [%d bytes cut]", len(s)))
	n, i := 0, 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		w := jsonRuneLen(r, size)
		if n+w > budget {
			break
		}
		n += w
		i += size
	}
	return s[:i] + fmt.Sprintf("… [%d bytes cut]", len(s)-i)
}

// jsonStringLen is the length of s encoded by encoding/json, without its quotes.
func jsonStringLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n += jsonRuneLen(r, size)
		i += size
	}
	return n
}

// jsonRuneLen is the length of one decoded rune of a string encoded by encoding/json,
// which escapes quotes and backslashes, control characters, <, > and & (HTML-safe),
// U+2028 and U+2029, and replaces invalid bytes with \ufffd.
func jsonRuneLen(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return len(`\ufffd`)
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return len(`\u00XX`)
	}
	return size
}

// taskRoom is how much less result a workflow task's record holds, counted in result
// bytes: its workflow fields (names of at most 64 plain bytes), with the tasks its
// run adds among its dependents. 0 for a job outside a workflow.
func taskRoom(j *Job) int {
	t := j.task()
	if t == nil || t.Workflow == "" {
		return 0
	}
	n := 200 + len(t.Workflow) + len(t.Task)
	for _, l := range [][]string{t.Parents, t.Dependents, t.WaitingFor, t.FailedParents} {
		for _, s := range l {
			n += len(s) + 3
		}
	}
	j.mu.Lock()
	for _, a := range j.added {
		n += len(a.Name) + 3
	}
	j.mu.Unlock()
	return n/3*4 + 4
}
