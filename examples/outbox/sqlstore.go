package outbox

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/workq/workq/producer"
)

// The SQL SQLStore and Add run, in PostgreSQL's dialect (placeholders $1, $2…; MySQL
// and SQLite drivers may want ? instead). Schema creates the table: id is the job id,
// sent_at stays NULL until the relay has enqueued the row.
const (
	Schema = `CREATE TABLE workq_outbox (
	id         text PRIMARY KEY,
	kind       text NOT NULL DEFAULT '',
	payload    bytea NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now(),
	sent_at    timestamptz
);
CREATE INDEX workq_outbox_pending ON workq_outbox (created_at, id) WHERE sent_at IS NULL`

	InsertSQL   = `INSERT INTO workq_outbox (id, kind, payload) VALUES ($1, $2, $3)`
	PendingSQL  = `SELECT id, kind, payload FROM workq_outbox WHERE sent_at IS NULL ORDER BY created_at, id LIMIT $1`
	MarkSentSQL = `UPDATE workq_outbox SET sent_at = now() WHERE id = $1`
)

// Add inserts row into the outbox within tx, the application's own transaction: the
// job is enqueued (by a Relay) if and only if tx commits.
func Add(ctx context.Context, tx *sql.Tx, row Row) error {
	if _, err := tx.ExecContext(ctx, InsertSQL, row.ID, row.Kind, row.Payload); err != nil {
		return fmt.Errorf("outbox: add row %s: %w", row.ID, err)
	}
	return nil
}

// AddArgs adds a typed job under id, as producer.EnqueueArgs would enqueue it: its
// payload args as JSON, its kind args.Kind().
func AddArgs(ctx context.Context, tx *sql.Tx, id string, args producer.JobArgs) error {
	j, err := producer.NewJob(args, producer.ID(id))
	if err != nil {
		return fmt.Errorf("outbox: add row %s: %w", id, err)
	}
	return Add(ctx, tx, Row{ID: id, Kind: j.Kind, Payload: j.Payload})
}

// SQLStore is the outbox table through database/sql. It registers no driver: open
// DB with yours.
type SQLStore struct {
	DB *sql.DB
}

var _ Store = (*SQLStore)(nil)

// Pending runs PendingSQL.
func (s *SQLStore) Pending(ctx context.Context, limit int) ([]Row, error) {
	rs, err := s.DB.QueryContext(ctx, PendingSQL, limit)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		var r Row
		if err := rs.Scan(&r.ID, &r.Kind, &r.Payload); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

// MarkSent runs MarkSentSQL.
func (s *SQLStore) MarkSent(ctx context.Context, id string) error {
	res, err := s.DB.ExecContext(ctx, MarkSentSQL, id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("no outbox row %s", id)
	}
	return nil
}
