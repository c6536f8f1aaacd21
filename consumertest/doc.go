// Package consumertest tests workq handlers and the code that enqueues jobs, on a
// real embedded server: no worker, producer or server to wire by hand, and nothing
// mocked.
//
// Work runs one attempt of a Handler on a job and returns what the worker did with
// it — committed with its result, put back to retry after a delay, dead-lettered, or
// reassigned — as the worker settled it and as the job record then says, together
// with the error and a panic's value and stack:
//
//	res := consumertest.Work(t, handler, []byte(`{"to":"ada@example.com"}`), consumertest.Kind("send_email"))
//	if res.Outcome != consumertest.Committed {
//		t.Fatalf("outcome %s: %v", res.Outcome, res.Err)
//	}
//
// WorkArgs does the same for a typed job (consumer.RouteArgs, producer.EnqueueArgs).
//
// Enqueued lists the jobs waiting in a queue; RequireEnqueued and RequireEnqueuedArgs
// assert that the code under test enqueued exactly one matching job and return it;
// RequireNotEnqueued asserts that it enqueued none.
//
// # Examples
//
// The Example functions of this package show each helper. examples/service in the
// repository tests a service's handlers with WorkArgs: a commit, a retry, the last
// attempt and a permanent failure (examples/service/handler_test.go).
// docs/library.md has the helpers at a glance.
package consumertest
