package ui

import (
	"testing"
	"time"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/producer"
	"github.com/workq/workq/testenv"
)

// The sampler, on a real server, with no page served: it adds a sample of every
// queue each interval, forgets a queue that is deleted, and stops with Close (and a
// second Close does no harm).
func TestSamplerSamplesForgetsAndStops(t *testing.T) {
	t.Parallel()
	js := testenv.Start(t).JetStream(t)
	ctx := testenv.Context(t, 60*time.Second)
	for _, q := range []string{"kept", "gone"} {
		if _, err := producer.New(ctx, js, q); err != nil {
			t.Fatal(err)
		}
	}
	adm, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	const every = 100 * time.Millisecond
	d, err := New(adm, SampleEvery(every))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	hist := d.h.hist
	testenv.Eventually(t, 10*time.Second, "5 samples of each queue", func() bool {
		return len(hist.samples("kept")) >= 5 && len(hist.samples("gone")) >= 5
	})
	if err := adm.DeleteQueue(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the deleted queue forgotten", func() bool {
		return hist.samples("gone") == nil
	})

	d.Close()
	n := len(hist.samples("kept"))
	time.Sleep(5 * every)
	if m := len(hist.samples("kept")); m != n {
		t.Fatalf("%d samples after Close, then %d: the sampler did not stop", n, m)
	}
	d.Close()
}
