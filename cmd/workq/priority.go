package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/workq/workq/producer"
)

// priorityNames are the priority levels by name, lowest first: the CLI and NDJSON
// take a name (or the level's number, 1 lowest, as producer.Priority does) and show
// the name, so that a user of a queue where 1 is the highest cannot misread it.
var priorityNames = map[string]int{
	"low":    producer.PriorityLow,
	"normal": producer.PriorityNormal,
	"high":   producer.PriorityHigh,
	"urgent": producer.PriorityUrgent,
}

// priorityWant says what a priority takes.
const priorityWant = "want low, normal, high or urgent (or 1 to 4, 1 the lowest)"

// priorityArg is a priority level given by name or number: --priority, NDJSON
// "priority". 0 means not given.
type priorityArg int

// parsePriority reads a priority by name or number; "0" is not given.
func parsePriority(s string) (priorityArg, error) {
	if s == "0" {
		return 0, nil
	}
	if n, ok := priorityNames[strings.ToLower(strings.TrimSpace(s))]; ok {
		return priorityArg(n), nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= producer.PriorityLow && n <= producer.PriorityUrgent {
		return priorityArg(n), nil
	}
	return 0, fmt.Errorf("priority %s: %s", s, priorityWant)
}

// Set, String and Type make it a flag.
func (p *priorityArg) Set(s string) error {
	v, err := parsePriority(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

func (p *priorityArg) String() string {
	for name, n := range priorityNames {
		if n == int(*p) {
			return name
		}
	}
	return ""
}

func (p *priorityArg) Type() string { return "low|normal|high|urgent" }

// UnmarshalJSON takes a name or a number.
func (p *priorityArg) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n json.Number
		if json.Unmarshal(b, &n) != nil {
			return fmt.Errorf("priority %s: %s", b, priorityWant)
		}
		s = n.String()
	}
	v, err := parsePriority(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}
