package record

import (
	"encoding/json"
	"testing"
	"time"
)

func sample() *Record {
	now := time.Now()
	return &Record{ID: "01JXYZABCDEFGHJKMNPQRSTVWX", Queue: "bench-p-abc-1", State: Done, Attempt: 1, MaxAttempts: 10, Delivery: 1,
		Epoch: now.UnixNano(), Sequence: 123456, Worker: &Worker{Name: "host-1234", Host: "host", PID: 1234},
		EnqueuedAt: now, StartedAt: now, FinishedAt: now}
}

func BenchmarkZZMarshal(b *testing.B) {
	r := sample()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = json.Marshal(r)
	}
}

func BenchmarkZZAppend(b *testing.B) {
	r := sample()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = r.AppendJSON(make([]byte, 0, 384))
	}
}
func BenchmarkZZReflect(b *testing.B) {
	r := sample()
	b.ReportAllocs()
	for b.Loop() {
		_, _ = json.Marshal(r)
	}
}
