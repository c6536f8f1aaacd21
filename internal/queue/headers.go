package queue

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
)

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
