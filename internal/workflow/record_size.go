package workflow

import (
	"fmt"

	"github.com/workq/workq/internal/record"
)

// writeHeaderRoom is what a record write's headers take at most beside the record:
// the expected revision and the message TTL.
const writeHeaderRoom = 256

// CheckRecordSize fails when job rec's record does not fit in a message of
// maxPayload bytes (the server's max payload): a task's names its parents and
// dependents, and a waiting job's (a task's or a sequence's) keeps its job message
// until it is released, its payload at about 4/3 of its size (base64 in the record's
// JSON).
func CheckRecordSize(rec *record.Record, maxPayload int64) error {
	b, err := rec.AppendJSON(nil)
	if err != nil {
		return fmt.Errorf("job %s: %w", rec.ID, err)
	}
	if int64(len(b)+writeHeaderRoom) > maxPayload {
		return fmt.Errorf("job %s: its record (with its parents and dependents, and its message in base64 while it waits) takes %d bytes, more than the server's max payload of %d less %d for the write's headers",
			rec.ID, len(b), maxPayload, writeHeaderRoom)
	}
	return nil
}
