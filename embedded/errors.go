package embedded

import (
	"errors"

	"github.com/workq/workq/internal/option"
)

// ErrInvalidOption is wrapped by every error about a bad option value or a bad
// combination of options. It is the same value as producer.ErrInvalidOption,
// consumer.ErrInvalidOption and kvlock.ErrInvalidOption: one errors.Is answers for
// every workq package.
var ErrInvalidOption = option.ErrInvalid

// ErrNoLeader is wrapped by WaitForLeader's error when no JetStream meta leader with
// every running node current and online was seen in time.
var ErrNoLeader = errors.New("embedded: no JetStream meta leader")
