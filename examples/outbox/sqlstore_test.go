package outbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
)

// tableDriver is a database/sql driver over one in-memory outbox table that
// understands exactly the statements SQLStore and Add send, so the test checks the
// SQL they run and the columns they scan without a database.
type tableDriver struct {
	mu   sync.Mutex
	rows []tableRow
}

type tableRow struct {
	id, kind string
	payload  []byte
	sent     bool
}

func (d *tableDriver) Open(string) (driver.Conn, error) { return &tableConn{d}, nil }

type tableConn struct{ d *tableDriver }

func (c *tableConn) Prepare(query string) (driver.Stmt, error) { return &tableStmt{c.d, query}, nil }
func (c *tableConn) Close() error                              { return nil }
func (c *tableConn) Begin() (driver.Tx, error)                 { return tableTx{}, nil }

type tableTx struct{}

func (tableTx) Commit() error   { return nil }
func (tableTx) Rollback() error { return nil }

type tableStmt struct {
	d     *tableDriver
	query string
}

func (s *tableStmt) Close() error  { return nil }
func (s *tableStmt) NumInput() int { return -1 }

func (s *tableStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	switch s.query {
	case InsertSQL:
		s.d.rows = append(s.d.rows, tableRow{id: args[0].(string), kind: args[1].(string), payload: args[2].([]byte)})
		return driver.RowsAffected(1), nil
	case MarkSentSQL:
		for i := range s.d.rows {
			if s.d.rows[i].id == args[0].(string) {
				s.d.rows[i].sent = true
				return driver.RowsAffected(1), nil
			}
		}
		return driver.RowsAffected(0), nil
	}
	return nil, fmt.Errorf("unexpected statement %q", s.query)
}

func (s *tableStmt) Query(args []driver.Value) (driver.Rows, error) {
	if s.query != PendingSQL {
		return nil, fmt.Errorf("unexpected query %q", s.query)
	}
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	out := &tableRows{}
	for _, r := range s.d.rows {
		if !r.sent && int64(len(out.rows)) < args[0].(int64) {
			out.rows = append(out.rows, []driver.Value{r.id, r.kind, r.payload})
		}
	}
	return out, nil
}

type tableRows struct{ rows [][]driver.Value }

func (r *tableRows) Columns() []string { return []string{"id", "kind", "payload"} }
func (r *tableRows) Close() error      { return nil }
func (r *tableRows) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return io.EOF
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}

// welcome is a typed job for AddArgs.
type welcome struct {
	To string `json:"to"`
}

func (welcome) Kind() string { return "welcome" }

// Rows added in a transaction come back from Pending with their id, kind and
// payload, oldest first, until MarkSent marks them.
func TestSQLStore(t *testing.T) {
	t.Parallel()
	name := "outbox-" + t.Name()
	sql.Register(name, &tableDriver{})
	db, err := sql.Open(name, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := AddArgs(ctx, tx, "welcome-ada", welcome{To: "ada@example.com"}); err != nil {
		t.Fatal(err)
	}
	if err := Add(ctx, tx, Row{ID: "raw-1", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	s := &SQLStore{DB: db}
	rows, err := s.Pending(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{{ID: "welcome-ada", Kind: "welcome", Payload: []byte(`{"to":"ada@example.com"}`)}, {ID: "raw-1", Payload: []byte("x")}}
	if !slices.EqualFunc(rows, want, func(a, b Row) bool { return a.ID == b.ID && a.Kind == b.Kind && string(a.Payload) == string(b.Payload) }) {
		t.Fatalf("pending %q, want %q", rows, want)
	}
	if err := s.MarkSent(ctx, "welcome-ada"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkSent(ctx, "no-such-row"); err == nil {
		t.Error("MarkSent of an unknown row: no error")
	}
	rows, err = s.Pending(ctx, 10)
	if err != nil || len(rows) != 1 || rows[0].ID != "raw-1" {
		t.Fatalf("pending after a mark: %q, %v; want only raw-1", rows, err)
	}
}
