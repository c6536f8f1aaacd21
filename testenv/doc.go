// Package testenv ties embedded nats-servers (package embedded) to tests: Start and
// StartCluster run a single server or an in-process cluster for a test and close it
// when the test ends, Conn and JetStream connect to it, StartProxy puts a
// fault-injection proxy in front of it, and Context, Eventually and WaitsForServer
// wait with deadlines.
//
// A test server takes embedded's options (testenv.Start(t, embedded.SyncAlways()));
// unlike embedded.Run, its store is in tmpfs by default (embedded.TmpfsStore),
// because a test never needs its data on disk. WORKQ_SERVER_LOG=1 in the environment
// shows the servers' logs on stderr.
package testenv
