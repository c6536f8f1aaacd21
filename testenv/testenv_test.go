package testenv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/testenv"
)

func TestRestartKeepsFileStreams(t *testing.T) {
	env := testenv.Start(t, testenv.SyncAlways())
	js := env.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s", []byte("x")); err != nil {
		t.Fatal(err)
	}
	url := env.URL()
	env.Restart(t)
	if env.URL() != url {
		t.Fatalf("URL changed across restart: %s -> %s", url, env.URL())
	}
	// The old connection reconnects by itself; wait for the stream through it.
	var info *jetstream.StreamInfo
	for {
		s, err := js.Stream(ctx, "S")
		if err == nil {
			info, err = s.Info(ctx)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("stream after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("messages after restart = %d, want 1", info.State.Msgs)
	}
}

func TestUserPassword(t *testing.T) {
	env := testenv.Start(t, testenv.UserPassword("u", "p"), testenv.MemoryStore())
	_, err := nats.Connect(env.URL(), nats.UserInfo("u", "wrong"))
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("wrong password: err = %v, want authorization violation", err)
	}
	nc := env.Conn(t)
	if !nc.IsConnected() {
		t.Fatal("not connected with the right password")
	}
}

func TestRunWithoutTesting(t *testing.T) {
	s, err := testenv.Run()
	if err != nil {
		t.Fatal(err)
	}
	dir := s.StoreDir()
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Close()
	if s.NATS() != nil {
		t.Fatal("server still set after Close")
	}
	if _, err := nats.Connect(s.URL(), nats.Timeout(time.Second)); err == nil {
		t.Fatal("connected after Close")
	}
	_ = dir
}

func TestClusterStopAndRestartNode(t *testing.T) {
	cl := testenv.StartCluster(t, 3)
	js := cl.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	leader := cl.StreamLeader("R")
	if leader < 0 {
		t.Fatal("no stream leader")
	}
	t.Logf("leader %d urls %v connected %s", leader, cl.URLs(), js.Conn().ConnectedUrl())
	cl.Stop(leader)
	// The stream keeps accepting writes on the remaining two nodes.
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.Publish(pctx, "r", []byte("x"))
		pcancel()
		if err == nil {
			break
		}
		t.Logf("publish: %v (connected to %s)", err, js.Conn().ConnectedUrl())
		if ctx.Err() != nil {
			t.Fatalf("publish with node %d down: %v", leader, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl.Restart(t, leader)
	if err := cl.WaitForLeader(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if len(cl.URLs()) != 3 {
		t.Fatalf("URLs = %v", cl.URLs())
	}
}
