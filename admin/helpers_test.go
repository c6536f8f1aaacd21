package admin_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/admin"
)

// adm is an Admin on js.
func adm(t *testing.T, js jetstream.JetStream) *admin.Admin {
	t.Helper()
	a, err := admin.New(js)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
