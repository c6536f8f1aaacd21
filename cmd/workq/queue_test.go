package main

import (
	"testing"
	"time"
)

func TestQueueSetValidate(t *testing.T) {
	t.Parallel()
	checkValidate(t, []validateCase{
		{"ack wait", &queueSetFlags{queue: "q", ackWait: time.Minute, ackWaitSet: true}, ""},
		{"shortest ack wait", &queueSetFlags{queue: "q", ackWait: 100 * time.Millisecond, ackWaitSet: true}, ""},
		{"nothing to set", &queueSetFlags{queue: "q", force: true}, "queue set: nothing to set (--max-running, --max-running-kind, --rate, --ack-wait)"},
		{"ack wait below 100ms", &queueSetFlags{queue: "q", ackWait: 99 * time.Millisecond, ackWaitSet: true}, "--ack-wait 99ms: want at least 100ms"},
		{"ack wait 0", &queueSetFlags{queue: "q", ackWaitSet: true}, "--ack-wait 0s: want at least 100ms"},
	})
}
