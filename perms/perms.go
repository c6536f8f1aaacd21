// Package perms says what a NATS user needs to be allowed, and nothing more, to take
// one part in a workq deployment: enqueue to a queue (Producer), work it (Worker),
// run it (Operator), or hold locks in one bucket (LockUser). Its permissions print as
// a nats-server configuration block, as the JSON of a user JWT's permissions, and as
// nsc flags; `workq perms` prints them.
//
// Everything not listed is denied. Provisioning is the operator's: a producer or a
// worker may look up its queue's streams, buckets and consumers but not create,
// change, purge or delete them, so an operator creates the queue first ('workq queue
// create', or admin.CreateQueue). A worker may delete single messages of its queue's
// jobs stream, for its sweep of finished jobs' leftovers (consumer/orphans.go): no
// more than it can do already by acking the jobs delivered to it.
//
// The lists assume the default JetStream API prefix ($JS.API, no domain) and the
// default inbox prefix (_INBOX): every role subscribes to _INBOX.>, where the server
// sends the replies to its requests. A user allowed _INBOX.> can also receive replies
// meant for other users of the account; a deployment that does not trust its users
// that far gives each user its own prefix with Inbox (clients then set
// nats.CustomInboxPrefix, or workq --inbox-prefix, to the same), or puts them in
// accounts of their own.
package perms

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/queue"
)

// Role is a part a user takes in a workq deployment.
type Role string

// The roles.
const (
	// Producer enqueues jobs to one queue (now, delayed, at a priority, unique) and
	// reads their status. It cannot take, change or cancel jobs, or manage schedules.
	Producer Role = "producer"
	// Worker works one queue: pulls from its consumers, acks, naks and heartbeats,
	// writes its job records and dead letters, takes its queue's limit slots and
	// rate permits, releases unique keys. Nothing else: no other queue, no purge,
	// no delete, no provisioning.
	Worker Role = "worker"
	// Operator manages every queue, lock bucket and limiter of the account: what
	// the workq CLI's queue, job, dlq, schedule, lock and ui commands and package
	// admin do, creating and deleting queues included. Name is ignored.
	Operator Role = "operator"
	// LockUser holds locks and semaphore slots in one kvlock bucket (the name), and
	// waits on them. The bucket must exist (an operator creates it; see
	// kvlock.New), as must any limiter, which LockUser does not cover.
	LockUser Role = "lock-user"
)

// Roles lists the roles, in the order the documentation gives them.
var Roles = []Role{Producer, Worker, Operator, LockUser}

// Errors For returns, for errors.Is.
var (
	// ErrUnknownRole means a role that is not one of Roles.
	ErrUnknownRole = errors.New("unknown role")
	// ErrInvalidInbox means an inbox prefix that is empty or not a plain subject.
	ErrInvalidInbox = errors.New("invalid inbox prefix")
)

// Permissions are the subjects a user may publish to and subscribe to; a user is
// denied every other subject.
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// Option changes what For lists.
type Option func(*config)

type config struct {
	inbox string
}

// Inbox sets the prefix of the user's reply subjects (nats.CustomInboxPrefix).
// Default "_INBOX", nats.go's: every client of the account shares it, so a user can
// subscribe to replies meant for others. A prefix of the user's own keeps its replies
// to itself. It must be a valid subject without wildcards.
func Inbox(prefix string) Option { return func(c *config) { c.inbox = prefix } }

// For returns the permissions of role on name: the queue of a Producer or Worker,
// the bucket of a LockUser; Operator takes no name.
func For(role Role, name string, opts ...Option) (Permissions, error) {
	c := config{inbox: "_INBOX"}
	for _, o := range opts {
		o(&c)
	}
	if err := CheckInbox(c.inbox); err != nil {
		return Permissions{}, err
	}
	p := Permissions{Subscribe: []string{c.inbox + ".>"}}
	switch role {
	case Producer, Worker:
		n, err := queue.NamesFor(name)
		if err != nil {
			return Permissions{}, fmt.Errorf("perms: %w", err)
		}
		if role == Producer {
			p.Publish = producer(n)
		} else {
			p.Publish = worker(n)
		}
	case LockUser:
		if err := naming.Check("bucket", name); err != nil {
			return Permissions{}, fmt.Errorf("perms: %w", err)
		}
		p.Publish = lockUser(name)
	case Operator:
		p.Publish = operator()
	default:
		return Permissions{}, fmt.Errorf("perms: %w %q: want one of %s", ErrUnknownRole, role, roleList())
	}
	return p, nil
}

func roleList() string {
	s := make([]string, len(Roles))
	for i, r := range Roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// CheckInbox checks an inbox prefix as Inbox takes it: a subject without wildcards.
// An invalid one wraps ErrInvalidInbox.
func CheckInbox(prefix string) error {
	if prefix == "" || strings.ContainsAny(prefix, "*> \t\r\n") || strings.HasPrefix(prefix, ".") ||
		strings.HasSuffix(prefix, ".") || strings.Contains(prefix, "..") {
		return fmt.Errorf("perms: %w %q: want a subject without wildcards, e.g. _INBOX_worker1", ErrInvalidInbox, prefix)
	}
	return nil
}

// api is the JetStream API subject of op.
func api(op string) string { return "$JS.API." + op }

// readStream lets a user read the configuration and state of stream s and fetch its
// messages, by sequence or by subject, from the leader or (direct gets) any replica.
func readStream(s string) []string {
	return []string{api("STREAM.INFO." + s), api("STREAM.MSG.GET." + s), api("DIRECT.GET." + s), api("DIRECT.GET." + s + ".>")}
}

// bucket lets a user read and write the keys of KV bucket b (puts, compare-and-set
// updates, deletes: all are publishes to $KV.<b>.<key>).
func bucket(b string) []string {
	return append(readStream("KV_"+b), "$KV."+b+".>")
}

// watch lets a user watch the keys of KV bucket b: an ordered consumer that the
// client creates, is fed and deletes.
func watch(b string) []string {
	s := "KV_" + b
	return []string{api("CONSUMER.CREATE." + s + ".>"), api("CONSUMER.DELETE." + s + ".>"), api("CONSUMER.INFO." + s + ".>"), "$JS.FC." + s + ".>"}
}

// limiter lets a user take permits of the kvlock limiter name.
func limiter(name string) []string {
	return append(readStream("WORKQ_LIMIT_"+name), "workq.limit."+name)
}

func producer(n queue.Names) []string {
	p := []string{api("INFO"), api("STREAM.INFO." + n.DeadStream)}
	p = append(p, readStream(n.Stream)...)
	p = append(p, readStream("KV_"+n.Bucket)...)
	p = append(p, watch(n.Bucket)...) // Wait
	p = append(p, bucket(n.UniqueBucket)...)
	p = append(p, n.JobsSubject, n.JobsPrefix+">", n.PriorityPrefix()+">", n.DelayedPrefix+">")
	return dedup(p)
}

func worker(n queue.Names) []string {
	p := []string{api("INFO"), api("STREAM.INFO." + n.DeadStream)}
	p = append(p, readStream(n.Stream)...)
	p = append(p, api("STREAM.MSG.DELETE."+n.Stream)) // the sweep of finished jobs' messages (consumer/orphans.go)
	for _, level := range queue.Levels {
		c := n.LevelConsumer(level)
		p = append(p, api("CONSUMER.INFO."+n.Stream+"."+c), api("CONSUMER.MSG.NEXT."+n.Stream+"."+c))
	}
	p = append(p, "$JS.ACK."+n.Stream+".>")
	p = append(p, bucket(n.Bucket)...)
	p = append(p, bucket(n.UniqueBucket)...)
	p = append(p, bucket(n.LimitsBucket())...)
	p = append(p, watch(n.LimitsBucket())...)
	p = append(p, limiter(n.RateLimiter())...)
	p = append(p, n.DeadSubject)
	return dedup(p)
}

func lockUser(b string) []string {
	p := []string{api("INFO")}
	p = append(p, bucket(b)...)
	p = append(p, watch(b)...)
	return dedup(p)
}

func operator() []string {
	return []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$KV.>", "workq.>"}
}

func dedup(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
