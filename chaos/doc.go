// Package chaos is workq's real-process chaos suite. Its tests carry the build tag
// "chaos", so the ordinary test run skips them:
//
//	go test -tags chaos -count=1 -v ./chaos                     # short: about 2 minutes
//	WORKQ_CHAOS=full go test -tags chaos -count=1 -v -timeout 30m ./chaos  # full
//
// The tests build the workq and nats-server binaries from the module (nothing else is
// needed but Go and a POSIX sh) and run them as processes on 127.0.0.1: a nats-server
// with sync_interval: always, several `workq work` processes running a shell command per
// job, then a 3-node cluster with an R3 queue. Workers are SIGKILLed and replaced,
// SIGSTOPped past AckWait and resumed; the server is SIGKILLed and restarted on the same
// store; the cluster loses its stream leader to SIGKILL.
//
// Every revision of every job record is observed: the records bucket's stream is given a
// RePublish rule to a core subject, which the server publishes synchronously as it stores
// each revision, with the revision's stream sequence and the key's previous sequence in
// headers. A capture stream cannot take these (they carry the CAS writes'
// Nats-Expected-Last-Subject-Sequence headers, which a second stream would enforce), so
// the test subscribes to them itself. The check then proves completeness: every
// sequence from 1 to the bucket stream's last is either observed or read back from the
// stream; a revision that was overwritten while the observer could not hear it (a
// server SIGKILL drops what it had not yet republished) is reported, and it fails the
// test unless it was written inside a kill window.
package chaos
