package queue

import (
	"net/textproto"

	"github.com/nats-io/nats.go"

	"github.com/workq/workq/internal/naming"
	"github.com/workq/workq/internal/wireid"
)

// Headers workq sets on a job message. Every one is optional: a plain publish to the
// jobs subject is a valid job.
const (
	// HeaderID carries the job id; it is JetStream's own dedup header, so an id
	// enqueued twice within the duplicate window is stored once.
	HeaderID = "Nats-Msg-Id"
	// HeaderKind routes the job to a handler (consumer.Mux).
	HeaderKind = "Workq-Kind"
	// HeaderMaxAttempts overrides the worker's attempt limit for this job.
	HeaderMaxAttempts = "Workq-Max-Attempts"
	// HeaderEnqueue names the enqueue a job message belongs to: a random id the
	// producer stamps on every copy of one enqueue, its retries included, and a new
	// one on each new enqueue of the id (a requeue too). The job record names the
	// enqueue it is of, so a worker tells a copy of a job that ended (which never
	// runs) from the job enqueued again (docs/delivery.md). A message without it
	// belongs to the empty enqueue: a client that sets none has one enqueue per id.
	HeaderEnqueue = "Workq-Enqueue"
	// HeaderWorkflow marks a workflow's task with its workflow's id: a worker
	// processes it fenced (its record says whom it releases when it ends).
	HeaderWorkflow = "Workq-Workflow"
	// HeaderSequence marks a sequence's job with its key's token (internal/wireid):
	// a worker processes it fenced (its record's end tells the job after it).
	HeaderSequence = "Workq-Sequence"
)

// MaxEnqueueLen bounds a job's enqueue id (HeaderEnqueue), which the job record
// keeps; workq's are 26 bytes, and any client may set one.
const MaxEnqueueLen = 128

// MaxKindLen bounds a job's kind. Kinds are short routing names; the job record keeps
// the kind and budgets this much room for it, so that a kind set by any client cannot
// make the record too large to write.
const MaxKindLen = 1024

// Headers on a dead letter, besides the original job's headers.
const (
	HeaderDeadID       = "Workq-Job-Id"
	HeaderDeadAttempts = "Workq-Attempts"
	HeaderDeadError    = "Workq-Error"
	HeaderDeadSubject  = "Workq-Original-Subject"
	HeaderDeadSequence = "Workq-Original-Sequence"
	HeaderDeadQueue    = "Workq-Queue"
	HeaderDeadAt       = "Workq-Dead-At"
)

// Headers a dead letter carries when it had to be shrunk to fit the server's max
// payload (a job from a client that did not keep DeadLetterReserve free).
const (
	// HeaderPayloadTruncated: the payload was cut; the value is its original size.
	HeaderPayloadTruncated = "Workq-Payload-Truncated"
	// HeaderHeadersDropped: some of the job's own headers were left out; the value
	// is their names, comma-separated.
	HeaderHeadersDropped = "Workq-Headers-Dropped"
)

// Bounds of what a dead letter adds to its job's message (consumer/deadletter.go).
const (
	// MaxDeadError bounds the Workq-Error header: the error's first line, at most
	// this many bytes.
	MaxDeadError = 1024
	// maxSubject bounds the Workq-Original-Subject value of a workq job:
	// "workq." + queue + ".jobs." + the id's token.
	maxSubject = len("workq.") + naming.MaxLen + len(".jobs.") + wireid.MaxTokenLen
	// maxUint64Len is the longest decimal uint64 (and int64 with its sign).
	maxUint64Len = 20
	// maxTimeLen is the longest UTC time in RFC 3339 with nanoseconds.
	maxTimeLen = len("2006-01-02T15:04:05.999999999Z")
)

// DeadLetterReserve is the room a job leaves free under the server's max payload
// (which counts headers and payload) so that its dead letter always fits: a dead
// letter is the job's payload and headers plus the lines below, each at its
// largest. A producer refuses a job that does not leave it, so that a job it
// accepted can always be dead-lettered instead of being redelivered forever; a
// worker shrinks the dead letter of a job that did not leave it (published by
// another client).
//
// The lines: "Key: value\r\n" for the dead letter's message id (dead:<token>:<seq>),
// Workq-Job-Id, Workq-Queue, Workq-Attempts, Workq-Error (MaxDeadError bytes),
// Workq-Original-Subject, Workq-Original-Sequence and Workq-Dead-At, and the header
// block's own framing in case the job had no headers. 2228 bytes, rounded up: the
// id is a token (internal/wireid) of up to 269 bytes.
const DeadLetterReserve = 2304

// deadLetterLines is the exact sum DeadLetterReserve rounds up; a test keeps them
// in step.
const deadLetterLines = len("NATS/1.0\r\n\r\n") +
	len(HeaderID+": dead:") + wireid.MaxTokenLen + len(":") + maxUint64Len + len("\r\n") +
	len(HeaderDeadID+": ") + wireid.MaxTokenLen + len("\r\n") +
	len(HeaderDeadQueue+": ") + naming.MaxLen + len("\r\n") +
	len(HeaderDeadAttempts+": ") + maxUint64Len + len("\r\n") +
	len(HeaderDeadError+": ") + MaxDeadError + len("\r\n") +
	len(HeaderDeadSubject+": ") + maxSubject + len("\r\n") +
	len(HeaderDeadSequence+": ") + maxUint64Len + len("\r\n") +
	len(HeaderDeadAt+": ") + maxTimeLen + len("\r\n")

// HeaderSize is the size of h as nats.go sends it and the server counts it against
// max_payload: nothing for no headers, else "NATS/1.0\r\n", a "Key: value\r\n"
// line per value (values trimmed of surrounding blanks) and a closing "\r\n".
func HeaderSize(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += HeaderLineSize(k, v)
		}
	}
	return n
}

// HeaderLineSize is the size of one "Key: value\r\n" line.
func HeaderLineSize(key, value string) int {
	return len(key) + len(": ") + len(textproto.TrimString(value)) + len("\r\n")
}

// MsgSize is the size of a message with headers h and payload data as the server
// counts it against max_payload.
func MsgSize(h nats.Header, data []byte) int { return HeaderSize(h) + len(data) }

// BatchHeaderPrefix starts the headers of an atomic batch publish (Nats-Batch-Id,
// -Sequence, -Commit). The server stores them with each message of a batch; they
// are transport, not the job's: a job's handler never sees them, and a copy of the
// message (a dead letter, a requeued job) must not carry them, or the server would
// take the copy for part of a batch.
const BatchHeaderPrefix = "Nats-Batch-"
