package main_test

import (
	"strings"
	"testing"
)

// queue set stores limits that queue info shows; flags not given keep their value;
// bad values are usage errors.
func TestQueueSetLimits(t *testing.T) {
	t.Parallel()
	const q = "limits-cli"
	ok(t, "", "enqueue", q, "x")
	out := ok(t, "", "queue", "set", q, "--max-running", "5", "--rate", "100/1s")
	if !strings.Contains(out, "limits max running 5, rate 100/1s (were none)") {
		t.Errorf("set said %q", out)
	}
	ok(t, "", "queue", "set", q, "--max-running-kind", "sms=2")
	if info := ok(t, "", "queue", "info", q); !strings.Contains(info, "max running 5, max running 2 of kind sms, rate 100/1s") {
		t.Errorf("queue info:\n%s", info)
	}
	ok(t, "", "queue", "set", q, "--rate", "off", "--max-running-kind", "sms=0")
	if info := ok(t, "", "queue", "info", q); !strings.Contains(info, "limits") || !strings.Contains(info, "max running 5\n") {
		t.Errorf("queue info after removing the rate and the kind's limit:\n%s", info)
	}
	for _, c := range []struct{ args, want []string }{
		{[]string{"--rate", "100"}, []string{"--rate", "n/window"}},
		{[]string{"--rate", "5/100ms"}, []string{"at least 250ms"}},
		{[]string{"--max-running", "-1"}, []string{"--max-running -1"}},
		{[]string{"--max-running-kind", "sms=lots"}, []string{"--max-running-kind sms=lots"}},
		{nil, []string{"nothing to set"}},
	} {
		oneLine(t, wq(t, "", append([]string{"queue", "set", q}, c.args...)...), 2, c.want...)
	}
}
