package admin

import (
	"encoding/json"
	"time"
)

// Duration is a time.Duration that reads as "30s" in JSON, for scripts and people.
type Duration time.Duration

// String formats d as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
