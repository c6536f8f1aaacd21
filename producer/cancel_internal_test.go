package producer

import (
	"testing"
	"time"

	"github.com/workq/workq/testenv"
)

// A cancel's removal of the job's message is done when the message is gone already:
// its first try removed it and lost its reply, and the try sent again finds nothing
// at the sequence (here the server says 10057, "no message found"; at the stream's
// end it says 10043). Fails with only 10037 taken as gone: the cancel reported that
// the message could not be removed.
func TestRemoveMessageGoneAlready(t *testing.T) {
	t.Parallel()
	env := testenv.Start(t)
	js := env.JetStream(t)
	ctx := testenv.Context(t, 20*time.Second)
	p, err := New(ctx, js, "rmgone")
	if err != nil {
		t.Fatal(err)
	}
	info, err := p.Enqueue(ctx, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.objects.Stream.DeleteMsg(ctx, info.Sequence); err != nil {
		t.Fatal(err)
	}
	if err := p.removeMessage(ctx, info.Sequence); err != nil {
		t.Fatalf("removing a message removed already: %v, want nil", err)
	}
}
