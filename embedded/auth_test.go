package embedded_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/embedded"
)

func TestUserPassword(t *testing.T) {
	t.Parallel()
	s := run(t, embedded.UserPassword("u", "p"), embedded.MemoryStore())
	for _, bad := range [][]nats.Option{{nats.UserInfo("u", "wrong")}, nil} {
		if nc, err := nats.Connect(s.URL(), bad...); !errors.Is(err, nats.ErrAuthorization) {
			if nc != nil {
				nc.Close()
			}
			t.Fatalf("connect with %d wrong or missing credentials: err = %v, want authorization violation", len(bad), err)
		}
	}
	nc, err := nats.Connect(s.URL(), s.ClientOptions()...)
	if err != nil {
		t.Fatalf("connect with ClientOptions: %v", err)
	}
	nc.Close()
}

func TestToken(t *testing.T) {
	t.Parallel()
	s := run(t, embedded.Token("secret"), embedded.MemoryStore())
	for _, bad := range [][]nats.Option{{nats.Token("wrong")}, nil} {
		if nc, err := nats.Connect(s.URL(), bad...); !errors.Is(err, nats.ErrAuthorization) {
			if nc != nil {
				nc.Close()
			}
			t.Fatalf("connect with %d wrong or missing token: err = %v, want authorization violation", len(bad), err)
		}
	}
	nc, err := nats.Connect(s.URL(), s.ClientOptions()...)
	if err != nil {
		t.Fatalf("connect with ClientOptions: %v", err)
	}
	nc.Close()
}
