package main

import (
	"fmt"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// groupCommitFlag is --group-commit: auto (the library's default: on for replicated
// queues, off on a single replica), on or off. It is a flag value, so a bad word is
// a usage error before anything connects.
type groupCommitFlag string

const groupCommitUsage = "share atomic batch writes between concurrent jobs: on, off, or auto (on for replicated queues); turn it on for a single server with sync_interval: always"

func (g *groupCommitFlag) String() string {
	if *g == "" {
		return "auto"
	}
	return string(*g)
}

func (g *groupCommitFlag) Set(s string) error {
	switch s {
	case "auto", "on", "off":
		*g = groupCommitFlag(s)
		return nil
	}
	return fmt.Errorf("want on, off or auto")
}

func (g *groupCommitFlag) Type() string { return "on|off|auto" }

// set reports the flag's choice, or false for auto.
func (g *groupCommitFlag) set() (on, set bool) {
	switch *g {
	case "on":
		return true, true
	case "off":
		return false, true
	}
	return false, false
}

// worker is the consumer option for the choice, or nil for auto.
func (g *groupCommitFlag) worker() consumer.Option {
	if on, ok := g.set(); ok {
		return consumer.GroupCommit(on)
	}
	return nil
}

// producer is the producer option for the choice, or nil for auto.
func (g *groupCommitFlag) producer() producer.Option {
	if on, ok := g.set(); ok {
		return producer.GroupCommit(on)
	}
	return nil
}
