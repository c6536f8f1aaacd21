package workflow

import (
	"errors"
	"fmt"
	"slices"
)

// ErrInvalid is the cause of every refused workflow: a bad name, a duplicate, an
// unknown parent or a cycle.
var ErrInvalid = errors.New("invalid workflow")

// Node is one task of a workflow's graph: its name and the names of its parents.
type Node struct {
	Name    string
	Parents []string
}

// Graph is a checked workflow graph.
type Graph struct {
	// Dependents are the names of the tasks that wait for each task, in the order
	// the tasks were given.
	Dependents map[string][]string
	// Roots are the tasks that wait for none, in the order given.
	Roots []string
}

// Check checks a workflow's tasks: valid, distinct names; parents that are tasks of
// the workflow, each named once and not the task itself; no cycle. It returns the
// graph's dependents and roots.
func Check(nodes []Node) (*Graph, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no tasks", ErrInvalid)
	}
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if err := CheckName("task", n.Name); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if _, dup := index[n.Name]; dup {
			return nil, fmt.Errorf("%w: two tasks named %q", ErrInvalid, n.Name)
		}
		index[n.Name] = i
	}
	g := &Graph{Dependents: make(map[string][]string, len(nodes))}
	for _, n := range nodes {
		if len(n.Parents) == 0 {
			g.Roots = append(g.Roots, n.Name)
		}
		var seen map[string]bool // for a fan-in, which may name thousands
		if len(n.Parents) > 16 {
			seen = make(map[string]bool, len(n.Parents))
		}
		for i, p := range n.Parents {
			switch _, ok := index[p]; {
			case p == n.Name:
				return nil, fmt.Errorf("%w: task %q depends on itself", ErrInvalid, n.Name)
			case !ok:
				return nil, fmt.Errorf("%w: task %q depends on %q, which is not a task of the workflow", ErrInvalid, n.Name, p)
			case seen[p] || seen == nil && slices.Contains(n.Parents[:i], p):
				return nil, fmt.Errorf("%w: task %q names %q as a parent twice", ErrInvalid, n.Name, p)
			}
			if seen != nil {
				seen[p] = true
			}
			g.Dependents[p] = append(g.Dependents[p], n.Name)
		}
	}
	if cycle := findCycle(nodes, index); cycle != nil {
		return nil, fmt.Errorf("%w: the tasks %q depend on each other in a cycle", ErrInvalid, cycle)
	}
	return g, nil
}

// findCycle returns the names of the tasks of a cycle, nil if there is none: a depth
// first walk over the parents that meets a task on its own path. Iterative, so a
// workflow of any depth cannot overflow the stack.
func findCycle(nodes []Node, index map[string]int) []string {
	const (
		unseen = iota
		onPath
		finished
	)
	state := make([]int, len(nodes))
	type frame struct{ node, next int }
	for start := range nodes {
		if state[start] != unseen {
			continue
		}
		path := []frame{{node: start}}
		state[start] = onPath
		for len(path) > 0 {
			top := &path[len(path)-1]
			parents := nodes[top.node].Parents
			if top.next == len(parents) {
				state[top.node] = finished
				path = path[:len(path)-1]
				continue
			}
			p := index[parents[top.next]]
			top.next++
			switch state[p] {
			case onPath:
				var cycle []string
				for i := len(path) - 1; i >= 0; i-- {
					cycle = append(cycle, nodes[path[i].node].Name)
					if path[i].node == p {
						break
					}
				}
				return cycle
			case unseen:
				state[p] = onPath
				path = append(path, frame{node: p})
			}
		}
	}
	return nil
}
