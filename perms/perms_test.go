package perms_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"

	"github.com/workq/workq/admin"
	"github.com/workq/workq/consumer"
	"github.com/workq/workq/perms"
)

// The JSON form is what a user JWT's permissions unmarshal from, subject for subject.
func TestJSONIsAUserJWTsPermissions(t *testing.T) {
	for _, r := range perms.Roles {
		name := "orders"
		if r == perms.Operator {
			name = ""
		}
		p, err := perms.For(r, name)
		if err != nil {
			t.Fatal(err)
		}
		var jp jwt.Permissions
		if err := json.Unmarshal(p.JSON(), &jp); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if !slices.Equal([]string(jp.Pub.Allow), p.Publish) || !slices.Equal([]string(jp.Sub.Allow), p.Subscribe) {
			t.Errorf("%s: JWT permissions %+v, want publish %v, subscribe %v", r, jp, p.Publish, p.Subscribe)
		}
	}
}

// Every role subscribes to its inbox only, and no role but the operator may touch
// JetStream's API beyond reading, pulling and deleting single messages of its own
// objects.
func TestRolesAreNarrow(t *testing.T) {
	for _, r := range []perms.Role{perms.Producer, perms.Worker, perms.LockUser} {
		p, err := perms.For(r, "orders", perms.Inbox("_INBOX_orders_1"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.Subscribe, []string{"_INBOX_orders_1.>"}) {
			t.Errorf("%s subscribes to %v, want its inbox only", r, p.Subscribe)
		}
		for _, s := range p.Publish {
			if strings.HasSuffix(s, ".*") || s == ">" || strings.Contains(s, "$JS.API.>") ||
				strings.Contains(s, ".PURGE.") || strings.Contains(s, "STREAM.CREATE") || strings.Contains(s, "STREAM.DELETE.") ||
				strings.Contains(s, "STREAM.UPDATE") || strings.Contains(s, "CONSUMER.DELETE.WORKQ_") {
				t.Errorf("%s may publish to %q", r, s)
			}
			if r != perms.LockUser && !strings.Contains(s, "orders") && s != "$JS.API.INFO" {
				t.Errorf("%s of orders may publish to %q, which is not about orders", r, s)
			}
		}
	}
}

func TestForRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		role perms.Role
		name string
		opts []perms.Option
		want error
	}{
		{"admin", "orders", nil, perms.ErrUnknownRole},
		{perms.Worker, "", nil, consumer.ErrInvalidName},
		{perms.Worker, "a.b", nil, consumer.ErrInvalidName},
		{perms.Producer, "x>", nil, consumer.ErrInvalidName},
		{perms.LockUser, "", nil, consumer.ErrInvalidName},
		{perms.Worker, "orders", []perms.Option{perms.Inbox("_INBOX.>")}, perms.ErrInvalidInbox},
		{perms.Worker, "orders", []perms.Option{perms.Inbox("")}, perms.ErrInvalidInbox},
	} {
		if _, err := perms.For(c.role, c.name, c.opts...); !errors.Is(err, c.want) {
			t.Errorf("For(%q, %q): %v, want %v", c.role, c.name, err, c.want)
		}
	}
}

// An operator's queue fits workers left at their defaults.
func TestCreateQueueDefaultsAreTheWorkers(t *testing.T) {
	if admin.DefaultAckWait != consumer.DefaultAckWait || admin.DefaultMaxAckPending != consumer.DefaultMaxAckPending {
		t.Errorf("admin's defaults %s, %d; the worker's %s, %d", admin.DefaultAckWait, admin.DefaultMaxAckPending,
			consumer.DefaultAckWait, consumer.DefaultMaxAckPending)
	}
}
