// Package embedded runs nats-server with JetStream inside a Go program: a single
// server for development and small deployments (what `workq server` runs), or an
// in-process cluster.
//
// Run starts a server and returns once it accepts connections; URL is where clients
// connect, Stop and Restart stop and start it again on the same ports and store, and
// Close shuts it down, removing its store if Run created one. NATS gives the
// underlying *server.Server for anything this package does not wrap.
//
// With no options the server listens on 127.0.0.1 on a free port, with no
// authentication and no TLS, stores JetStream data in a new temporary directory that
// Close removes, fsyncs every 2 minutes and logs nothing. Options change each of
// these: Dir keeps the data, Port and Host say where to listen, UserPassword or
// Token require credentials, TLS or TLSFiles encrypt client connections, SyncAlways
// fsyncs every write, ClusterName, Name, RoutePort and Routes join a node to other
// servers, Logger or LogWriter show the server's log. A bad option value is an error
// wrapping ErrInvalidOption when Run starts.
//
// RunCluster starts n nodes at once, routed to each other, and waits for a
// JetStream meta leader. For production, run nats-server itself, ideally as a
// 3-node cluster on three machines.
//
// The package does not depend on "testing": package testenv ties these servers to
// tests.
package embedded
