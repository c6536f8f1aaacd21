package admin

import (
	"context"

	"github.com/workq/workq/producer"
)

// ScheduleInfo is a periodic schedule as the producer reports it.
type ScheduleInfo = producer.ScheduleInfo

// Schedules returns the periodic schedules of queue name, by name.
func (a *Admin) Schedules(ctx context.Context, name string) ([]ScheduleInfo, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.Schedules(ctx)
}

// Schedule returns the periodic schedule called schedule on queue name.
func (a *Admin) Schedule(ctx context.Context, name, schedule string) (*ScheduleInfo, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.GetSchedule(ctx, schedule)
}

// PauseSchedule stops a periodic schedule from firing until ResumeSchedule; its
// definition is kept.
func (a *Admin) PauseSchedule(ctx context.Context, name, schedule string) (*ScheduleInfo, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.PauseSchedule(ctx, schedule)
}

// ResumeSchedule lets a paused periodic schedule fire again, from its next time.
func (a *Admin) ResumeSchedule(ctx context.Context, name, schedule string) (*ScheduleInfo, error) {
	p, err := a.producer(ctx, name)
	if err != nil {
		return nil, err
	}
	return p.ResumeSchedule(ctx, schedule)
}

// RemoveSchedule deletes a periodic schedule; jobs it fired already are kept.
func (a *Admin) RemoveSchedule(ctx context.Context, name, schedule string) error {
	p, err := a.producer(ctx, name)
	if err != nil {
		return err
	}
	return p.RemoveSchedule(ctx, schedule)
}
