package embedded_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/embedded"
)

// With UserPassword or Token, a client without the credentials, or with wrong ones,
// is refused, and one with ClientOptions is let in.
func TestAuth(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		auth  embedded.Option
		wrong nats.Option
	}{
		{"user and password", embedded.UserPassword("u", "p"), nats.UserInfo("u", "wrong")},
		{"token", embedded.Token("secret"), nats.Token("wrong")},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := run(t, c.auth, embedded.TmpfsStore())
			for _, bad := range [][]nats.Option{{c.wrong}, nil} {
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
		})
	}
}
