package outbox

import (
	"context"
	"fmt"
	"sync"
)

// MemStore is an outbox kept in memory, for tests and this sketch's own.
type MemStore struct {
	mu   sync.Mutex
	rows []memRow
}

type memRow struct {
	Row
	sent bool
}

// Add appends rows, as the application's transaction would insert them.
func (m *MemStore) Add(rows ...Row) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range rows {
		m.rows = append(m.rows, memRow{Row: r})
	}
}

// Pending returns up to limit unsent rows, oldest first.
func (m *MemStore) Pending(_ context.Context, limit int) ([]Row, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Row
	for _, r := range m.rows {
		if len(out) == limit {
			break
		}
		if !r.sent {
			out = append(out, r.Row)
		}
	}
	return out, nil
}

// MarkSent marks the row with id sent.
func (m *MemStore) MarkSent(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.rows {
		if m.rows[i].ID == id {
			m.rows[i].sent = true
			return nil
		}
	}
	return fmt.Errorf("no outbox row %s", id)
}
