package admin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/admin"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// A dead letter that kept only part of its payload (it was shrunk to fit the server's
// max payload) is not requeued: its job would run on the part that fitted.
func TestRequeueRefusesTruncatedDeadLetter(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := producer.New(ctx, js, "cut"); err != nil {
		t.Fatal(err)
	}
	for id, truncated := range map[string]bool{"whole": false, "partial": true} {
		m := &nats.Msg{Subject: "workq.cut.dead", Data: []byte("p"), Header: nats.Header{}}
		m.Header.Set("Workq-Job-Id", id)
		m.Header.Set("Nats-Msg-Id", "dead:"+id)
		if truncated {
			m.Header.Set("Workq-Payload-Truncated", "1048576")
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	done, err := admin.Requeue(ctx, js, "cut", admin.Selection{IDs: []string{"partial"}}, nil)
	if err == nil || len(done) != 0 || !strings.Contains(err.Error(), "part of its payload") {
		t.Fatalf("Requeue of a truncated dead letter: %v, %v; want refused", done, err)
	}
	done, err = admin.Requeue(ctx, js, "cut", admin.Selection{IDs: []string{"whole"}}, nil)
	if err != nil || len(done) != 1 {
		t.Fatalf("Requeue of a whole dead letter: %v, %v", done, err)
	}
}
