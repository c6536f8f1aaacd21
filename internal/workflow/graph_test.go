package workflow

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	n := func(name string, parents ...string) Node { return Node{Name: name, Parents: parents} }
	wide := []Node{n("a")} // a fan-in of 40, then one naming a parent twice
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("p%d", i))
		wide = append(wide, n(names[i], "a"))
	}
	wideTwice := append(slices.Clone(wide), n("z", append(slices.Clone(names), "p7")...))
	wide = append(wide, n("z", names...))
	for _, c := range []struct {
		name  string
		nodes []Node
		err   string // "" for a valid graph
	}{
		{"diamond", []Node{n("a"), n("b", "a"), n("c", "a"), n("d", "b", "c")}, ""},
		{"parents given after", []Node{n("d", "b", "c"), n("b", "a"), n("c", "a"), n("a")}, ""},
		{"empty", nil, "no tasks"},
		{"bad name", []Node{n("a b")}, "invalid name"},
		{"dot", []Node{n("a.b")}, "invalid name"},
		{"duplicate", []Node{n("a"), n("a")}, `two tasks named "a"`},
		{"unknown", []Node{n("a", "x")}, `depends on "x", which is not a task`},
		{"self", []Node{n("a", "a")}, "depends on itself"},
		{"parent twice", []Node{n("a"), n("b", "a", "a")}, "twice"},
		{"wide fan-in", wide, ""},
		{"parent twice in a wide fan-in", wideTwice, `names "p7" as a parent twice`},
		{"cycle of two", []Node{n("a", "b"), n("b", "a")}, "cycle"},
		{"cycle of three", []Node{n("x"), n("a", "c", "x"), n("b", "a"), n("c", "b")}, "cycle"},
	} {
		g, err := Check(c.nodes)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.err != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want ErrInvalid saying %q", c.name, err, c.err)
		case c.err == "" && c.name == "diamond":
			if !slices.Equal(g.Roots, []string{"a"}) || !slices.Equal(g.Dependents["a"], []string{"b", "c"}) || !slices.Equal(g.Dependents["c"], []string{"d"}) {
				t.Errorf("diamond: roots %v, dependents %v", g.Roots, g.Dependents)
			}
		}
	}
}

// A chain deeper than a recursive walk's stack would take is checked, and a cycle
// closing it found.
func TestCheckDeepChain(t *testing.T) {
	t.Parallel()
	const depth = 200000
	nodes := make([]Node, depth)
	for i := range nodes {
		nodes[i].Name = fmt.Sprintf("t%d", i)
		if i > 0 {
			nodes[i].Parents = []string{nodes[i-1].Name}
		}
	}
	if _, err := Check(nodes); err != nil {
		t.Fatal(err)
	}
	nodes[0].Parents = []string{nodes[depth-1].Name}
	if _, err := Check(nodes); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("closed chain: %v", err)
	}
}
