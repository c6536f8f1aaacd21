package producer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/workq/workq/internal/jserr"
	"github.com/workq/workq/internal/option"
	"github.com/workq/workq/internal/queue"
	"github.com/workq/workq/internal/retry"
	"github.com/workq/workq/internal/schedule"
)

// ScheduleInfo is a periodic schedule of a queue, as Schedules and GetSchedule
// report it.
type ScheduleInfo struct {
	// Name names the schedule in the queue; its firings' job ids start with it.
	Name string
	// Spec is when it fires, as it was given (see Producer.Schedule).
	Spec string
	// Paused: the schedule does not fire until resumed.
	Paused bool
	// Next is when it fires next; zero while paused. For an interval it is counted
	// from the time the schedule was stored, as the server counts it.
	Next time.Time
	// Kind, MaxAttempts, Priority, Header and Payload are those of every job it
	// fires (Priority PriorityNormal unless the Priority option said otherwise).
	Kind        string
	MaxAttempts int
	Priority    int
	Header      nats.Header
	Payload     []byte
	// UpdatedAt is when the schedule was last stored (added, changed, paused or
	// resumed); Sequence is its message's stream sequence.
	UpdatedAt time.Time
	Sequence  uint64
}

// Schedule adds the periodic schedule name to the queue, or changes the one of
// that name: the server then fires a job with payload and opts' kind, headers and
// max attempts at every time of spec. Each firing is one job, whose id is the
// schedule's name and the firing's time ("nightly/20261124T020000Z"; Job.Schedule and
// Job.ScheduledAt on the worker), so a firing never runs twice even if the server
// fires it twice across a change of stream leader.
//
// spec is "@every <duration>" (whole seconds, at least 1s), five cron fields
// ("0 2 * * *": minute hour day-of-month month day-of-week), or @hourly, @daily,
// @weekly, @monthly, @yearly; a cron spec is read in UTC, or in the zone of a
// "TZ=Europe/Berlin " prefix. An invalid spec is ErrInvalidSchedule.
//
// Adding a schedule exactly as it is changes nothing (an interval keeps counting
// from when it was stored), so every instance of a service may add its schedules at
// start. A changed schedule keeps its paused state. ID and At options do not apply.
func (p *Producer) Schedule(ctx context.Context, name, spec string, payload []byte, opts ...EnqueueOption) (*ScheduleInfo, error) {
	if err := p.checkSchedule(ctx, name); err != nil {
		return nil, err
	}
	sp, err := schedule.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue, err)
	}
	j := Job{Payload: payload}
	for _, o := range opts {
		if o != nil {
			o(&j)
		}
	}
	if j.ID != "" || !j.At.IsZero() {
		return nil, fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue,
			option.Invalid("ID/At", j.ID+j.At.String(), "none: a schedule's firings are named after its name and their time"))
	}
	if j.Sequence != "" {
		return nil, fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue,
			option.Invalid("Sequence", j.Sequence, "none: the server fires a schedule, and a firing cannot take its place in a sequence"))
	}
	j.ID = schedule.FiringID(name, time.Now()) // checks the job's options and size as a firing's
	msg, err := p.message(ctx, &j)
	if err != nil {
		return nil, err
	}
	msg.Header.Del(queue.HeaderID)
	msg.Header.Set(queue.HeaderSchedule, name)
	msg.Header.Set(queue.HeaderScheduleSpec, sp.Text)
	if level(j.Priority) != PriorityNormal {
		msg.Header.Set(queue.HeaderSchedulePriority, strconv.Itoa(j.Priority))
	}
	target := p.names.LevelSubject(level(j.Priority)) // message() checked it
	return p.storeSchedule(ctx, name, func(old *ScheduleInfo) *nats.Msg {
		if old != nil && old.Spec == sp.Text && sameJob(old, &j) {
			return nil
		}
		if old != nil && old.Paused {
			setPaused(msg.Header)
		} else {
			setPattern(msg.Header, sp, target)
		}
		return msg
	})
}

// setPattern makes h a schedule the server fires: its pattern, zone and target.
func setPattern(h nats.Header, sp schedule.Spec, target string) {
	h.Del(queue.HeaderSchedulePaused)
	h.Set(queue.HeaderNatsSchedule, sp.Pattern())
	if sp.Zone != "" {
		h.Set(queue.HeaderNatsScheduleTimeZone, sp.Zone)
	}
	h.Set(queue.HeaderNatsScheduleTarget, target)
}

// setPaused makes h a paused schedule: the server does not fire it.
func setPaused(h nats.Header) {
	h.Del(queue.HeaderNatsSchedule)
	h.Del(queue.HeaderNatsScheduleTimeZone)
	h.Del(queue.HeaderNatsScheduleTarget)
	h.Set(queue.HeaderSchedulePaused, "true")
}

// sameJob reports whether schedule s fires the job j.
func sameJob(s *ScheduleInfo, j *Job) bool {
	return s.Kind == j.Kind && s.MaxAttempts == j.MaxAttempts && s.Priority == level(j.Priority) && string(s.Payload) == string(j.Payload) &&
		maps.EqualFunc(s.Header, userHeaders(j.Header), slices.Equal)
}

// GetSchedule returns the periodic schedule name, or ErrScheduleNotFound.
func (p *Producer) GetSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	if err := p.checkSchedule(ctx, name); err != nil {
		return nil, err
	}
	s, _, err := p.loadSchedule(ctx, name)
	if err == nil && s == nil {
		err = ErrScheduleNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue, err)
	}
	return s, nil
}

// Schedules lists the queue's periodic schedules, by name.
func (p *Producer) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	if ctx == nil {
		return nil, fmt.Errorf("producer: schedules of queue %s: %w", p.names.Queue, option.Nil("context"))
	}
	info, err := p.objects.Stream.Info(ctx, jetstream.WithSubjectFilter(p.names.PeriodicPrefix+">"))
	if err != nil {
		return nil, fmt.Errorf("producer: schedules of queue %s: %w", p.names.Queue, err)
	}
	var out []ScheduleInfo
	for _, subject := range slices.Sorted(maps.Keys(info.State.Subjects)) {
		s, _, err := p.loadSchedule(ctx, strings.TrimPrefix(subject, p.names.PeriodicPrefix))
		if err != nil {
			return nil, fmt.Errorf("producer: schedules of queue %s: %w", p.names.Queue, err)
		}
		if s != nil {
			out = append(out, *s)
		}
	}
	return out, nil
}

// PauseSchedule stops the schedule name from firing until ResumeSchedule. The
// server forgets the pattern; the schedule's definition stays.
func (p *Producer) PauseSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	return p.setPaused(ctx, name, true)
}

// ResumeSchedule makes a paused schedule fire again from now on; firings it missed
// while paused are not made up. An interval counts from the resume.
func (p *Producer) ResumeSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	return p.setPaused(ctx, name, false)
}

func (p *Producer) setPaused(ctx context.Context, name string, paused bool) (*ScheduleInfo, error) {
	if err := p.checkSchedule(ctx, name); err != nil {
		return nil, err
	}
	var missing bool
	s, err := p.storeSchedule(ctx, name, func(old *ScheduleInfo) *nats.Msg {
		if old == nil {
			missing = true
			return nil
		}
		if old.Paused == paused {
			return nil
		}
		msg := p.scheduleMsg(old)
		if paused {
			setPaused(msg.Header)
		} else {
			sp, _ := schedule.Parse(old.Spec) // loadSchedule checked it
			setPattern(msg.Header, sp, p.names.LevelSubject(old.Priority))
		}
		return msg
	})
	if err == nil && missing {
		err = fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue, ErrScheduleNotFound)
	}
	return s, err
}

// RemoveSchedule removes the schedule name: it fires no more. Jobs it fired
// already are not touched. An unknown name is ErrScheduleNotFound.
func (p *Producer) RemoveSchedule(ctx context.Context, name string) error {
	if err := p.checkSchedule(ctx, name); err != nil {
		return err
	}
	subject := p.names.PeriodicSubject(name)
	var resp *jetstream.StreamInfo
	err := retry.Do(ctx, func(ctx context.Context) (err error) {
		resp, err = p.objects.Stream.Info(ctx, jetstream.WithSubjectFilter(subject))
		return err
	})
	if err == nil && resp.State.Msgs == 0 {
		err = ErrScheduleNotFound
	}
	if err == nil {
		// A purge sent again after its reply was lost purges nothing more.
		err = retry.Do(ctx, func(ctx context.Context) error {
			return p.objects.Stream.Purge(ctx, jetstream.WithPurgeSubject(subject))
		})
	}
	if err != nil {
		return fmt.Errorf("producer: remove schedule %s on queue %s: %w", name, p.names.Queue, err)
	}
	return nil
}

// checkSchedule checks the arguments every schedule call takes.
func (p *Producer) checkSchedule(ctx context.Context, name string) error {
	if ctx == nil {
		return fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue, option.Nil("context"))
	}
	if err := checkScheduleName(name); err != nil {
		return fmt.Errorf("producer: queue %s: %w", p.names.Queue, err)
	}
	if p.objects.SchedulesErr != nil {
		return fmt.Errorf("producer: schedule %s: %w", name, p.objects.SchedulesErr)
	}
	return nil
}

// checkScheduleName checks a schedule name: a subject token as it is, short enough
// for its firings' ids (schedule.MaxNameLen).
func checkScheduleName(name string) error {
	if err := queue.CheckToken("schedule name", name); err != nil {
		return fmt.Errorf("schedule name: %w", err)
	}
	if len(name) > schedule.MaxNameLen {
		return fmt.Errorf("%w: schedule name %.20q… is longer than %d characters", ErrInvalidName, name, schedule.MaxNameLen)
	}
	return nil
}

// storeSchedule writes the message that change makes of the schedule as it stands
// (nil if there is none), as a compare-and-set on the schedule's last message, and
// reads again and retries when another writer came first. A nil message from
// change writes nothing. Older messages of the schedule are then purged: the last
// one is the schedule.
func (p *Producer) storeSchedule(ctx context.Context, name string, change func(old *ScheduleInfo) *nats.Msg) (*ScheduleInfo, error) {
	subject := p.names.PeriodicSubject(name)
	for range 8 {
		old, seq, err := p.loadSchedule(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue, err)
		}
		msg := change(old)
		if msg == nil {
			return old, nil
		}
		msg.Subject = subject
		msg.Header.Set(queue.HeaderNatsExpectedLastSubj, strconv.FormatUint(seq, 10))
		var ack *jetstream.PubAck
		err = retry.UntilLeader(ctx, func() (err error) { ack, err = p.js.PublishMsg(ctx, msg); return err })
		if jserr.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue, err)
		}
		_ = p.objects.Stream.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(ack.Sequence))
		s, _, err := p.loadSchedule(ctx, name)
		if err == nil && s == nil {
			err = ErrScheduleNotFound // removed as it was written
		}
		if err != nil {
			return nil, fmt.Errorf("producer: schedule %s on queue %s: %w", name, p.names.Queue, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("producer: schedule %s on queue %s: it kept changing under concurrent writers", name, p.names.Queue)
}

// loadSchedule reads the schedule name and its message's sequence: nil and 0 if
// there is none.
func (p *Producer) loadSchedule(ctx context.Context, name string) (*ScheduleInfo, uint64, error) {
	m, err := p.lastMsg(ctx, p.names.PeriodicSubject(name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	sp, err := schedule.Parse(m.Header.Get(queue.HeaderScheduleSpec))
	if err != nil {
		return nil, 0, fmt.Errorf("message %d is not a workq schedule: %w", m.Sequence, err)
	}
	s := &ScheduleInfo{
		Name: name, Spec: sp.Text, Paused: m.Header.Get(queue.HeaderNatsSchedule) == "",
		Kind: m.Header.Get(queue.HeaderKind), Header: userHeaders(m.Header), Payload: m.Data,
		UpdatedAt: m.Time, Sequence: m.Sequence,
	}
	if n, err := strconv.Atoi(m.Header.Get(queue.HeaderMaxAttempts)); err == nil {
		s.MaxAttempts = n
	}
	s.Priority = PriorityNormal
	if n, err := strconv.Atoi(m.Header.Get(queue.HeaderSchedulePriority)); err == nil && queue.ValidPriority(n) {
		s.Priority = n
	}
	if !s.Paused {
		s.Next = sp.Next(m.Time, time.Now())
	}
	return s, m.Sequence, nil
}

// scheduleMsg is the message of schedule s, paused (setPattern makes it fire).
func (p *Producer) scheduleMsg(s *ScheduleInfo) *nats.Msg {
	h := nats.Header{}
	for k, v := range s.Header {
		h[k] = slices.Clone(v)
	}
	if s.Kind != "" {
		h.Set(queue.HeaderKind, s.Kind)
	}
	if s.MaxAttempts > 0 {
		h.Set(queue.HeaderMaxAttempts, strconv.Itoa(s.MaxAttempts))
	}
	h.Set(queue.HeaderSchedule, s.Name)
	h.Set(queue.HeaderScheduleSpec, s.Spec)
	if s.Priority != PriorityNormal {
		h.Set(queue.HeaderSchedulePriority, strconv.Itoa(s.Priority))
	}
	setPaused(h)
	return &nats.Msg{Data: s.Payload, Header: h}
}

// userHeaders are the headers of h that the schedule's owner set: not workq's, not
// the server's.
func userHeaders(h nats.Header) nats.Header {
	out := nats.Header{}
	for k, v := range h {
		if strings.HasPrefix(k, "Workq-") || strings.HasPrefix(k, "Nats-") {
			continue
		}
		out[k] = v
	}
	return out
}
