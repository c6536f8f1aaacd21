package workflow

import (
	"fmt"

	"github.com/workq/workq/internal/record"
)

// writeHeaderRoom is what a record write's headers take at most beside the record:
// the expected revision and the message TTL.
const writeHeaderRoom = 256

// CheckRecordSize fails, wrapping ErrInvalid, when task rec's record does not fit in
// a message of maxPayload bytes (the server's max payload): it names the task's
// parents and dependents, and a waiting task's keeps its job message until the task
// is released, its payload at about 4/3 of its size (base64 in the record's JSON).
func CheckRecordSize(rec *record.Record, maxPayload int64) error {
	b, err := rec.AppendJSON(nil)
	if err != nil {
		return fmt.Errorf("%w: task %q: %w", ErrInvalid, rec.Task, err)
	}
	if int64(len(b)+writeHeaderRoom) > maxPayload {
		return fmt.Errorf("%w: task %q: its record (its parents, its dependents, and its message in base64 until its parents end) takes %d bytes, more than the server's max payload of %d less %d for the write's headers",
			ErrInvalid, rec.Task, len(b), maxPayload, writeHeaderRoom)
	}
	return nil
}
