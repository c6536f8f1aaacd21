package ui

import (
	"fmt"
	"slices"
	"testing"
)

// task is a graphTask for the table below.
func task(name string, parents ...string) graphTask { return graphTask{Name: name, Parents: parents} }

// Every graph is drawn with each task in the column of its longest path from a
// root, in the row order wanted, no two boxes overlapping, all inside the drawing,
// and an edge from each known parent's right side to its dependent's left side.
func TestLayoutGraph(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tasks []graphTask
		depth map[string]int
		rows  [][]string // each column's tasks, top to bottom
		edges []string   // "parent>dependent"
	}{
		{
			name:  "one task",
			tasks: []graphTask{task("only")},
			depth: map[string]int{"only": 0},
			rows:  [][]string{{"only"}},
		},
		{
			name:  "diamond",
			tasks: []graphTask{task("a"), task("b", "a"), task("c", "a"), task("d", "b", "c")},
			depth: map[string]int{"a": 0, "b": 1, "c": 1, "d": 2},
			rows:  [][]string{{"a"}, {"b", "c"}, {"d"}},
			edges: []string{"a>b", "a>c", "b>d", "c>d"},
		},
		{
			name: "fan-out and fan-in",
			tasks: []graphTask{task("split"), task("p0", "split"), task("p1", "split"), task("p2", "split"),
				task("p3", "split"), task("p4", "split"), task("join", "p0", "p1", "p2", "p3", "p4")},
			depth: map[string]int{"split": 0, "p0": 1, "p1": 1, "p2": 1, "p3": 1, "p4": 1, "join": 2},
			rows:  [][]string{{"split"}, {"p0", "p1", "p2", "p3", "p4"}, {"join"}},
			edges: []string{"split>p0", "split>p1", "split>p2", "split>p3", "split>p4", "p0>join", "p1>join", "p2>join", "p3>join", "p4>join"},
		},
		{
			name:  "longest path wins: a shortcut does not pull a task left",
			tasks: []graphTask{task("c", "a", "b"), task("b", "a"), task("a")},
			depth: map[string]int{"a": 0, "b": 1, "c": 2},
			rows:  [][]string{{"a"}, {"b"}, {"c"}},
			edges: []string{"a>c", "b>c", "a>b"},
		},
		{
			name:  "rows follow their parents: the dependents of the lower root stay low",
			tasks: []graphTask{task("r1"), task("r2"), task("x", "r2"), task("y", "r1")},
			depth: map[string]int{"r1": 0, "r2": 0, "x": 1, "y": 1},
			rows:  [][]string{{"r1", "r2"}, {"y", "x"}},
			edges: []string{"r2>x", "r1>y"},
		},
		{
			name:  "several roots, one with a dependent",
			tasks: []graphTask{task("a"), task("b"), task("c"), task("d", "c")},
			depth: map[string]int{"a": 0, "b": 0, "c": 0, "d": 1},
			rows:  [][]string{{"a", "b", "c"}, {"d"}},
			edges: []string{"c>d"},
		},
		{
			name:  "unknown and repeated parents are left out",
			tasks: []graphTask{task("a", "ghost"), task("b", "a", "a", "b")},
			depth: map[string]int{"a": 0, "b": 1},
			rows:  [][]string{{"a"}, {"b"}},
			edges: []string{"a>b"},
		},
		{
			name:  "a cycle (records another client wrote) goes after the rest",
			tasks: []graphTask{task("root"), task("x", "root", "y"), task("y", "x")},
			depth: map[string]int{"root": 0, "x": 1, "y": 1},
			rows:  [][]string{{"root"}, {"x", "y"}},
			edges: []string{"root>x", "y>x", "x>y"},
		},
		{
			name:  "nothing but a cycle",
			tasks: []graphTask{task("x", "y"), task("y", "x")},
			depth: map[string]int{"x": 0, "y": 0},
			rows:  [][]string{{"x", "y"}},
			edges: []string{"y>x", "x>y"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := layoutGraph(tc.tasks)
			if len(l.Boxes) != len(tc.tasks) {
				t.Fatalf("%d boxes for %d tasks", len(l.Boxes), len(tc.tasks))
			}
			byName := map[string]graphBox{}
			columns := make([][]graphBox, len(tc.rows))
			for i, b := range l.Boxes {
				if b.Name != tc.tasks[i].Name {
					t.Fatalf("box %d is %s; want %s (the order given)", i, b.Name, tc.tasks[i].Name)
				}
				byName[b.Name] = b
				if b.Depth != tc.depth[b.Name] {
					t.Errorf("%s: depth %d; want %d", b.Name, b.Depth, tc.depth[b.Name])
				}
				if b.Depth >= len(columns) {
					t.Fatalf("%s in column %d; want %d columns", b.Name, b.Depth, len(columns))
				}
				columns[b.Depth] = append(columns[b.Depth], b)
				if b.X < 0 || b.Y < 0 || b.X+b.W > l.Width || b.Y+b.H > l.Height || b.W <= 0 || b.H <= 0 {
					t.Errorf("%s: box %+v outside the drawing %dx%d", b.Name, b, l.Width, l.Height)
				}
			}
			for d, want := range tc.rows {
				col := slices.Clone(columns[d])
				slices.SortFunc(col, func(a, b graphBox) int { return a.Y - b.Y })
				var got []string
				for r, b := range col {
					got = append(got, b.Name)
					if b.Row != r || b.X != columns[d][0].X {
						t.Errorf("column %d: %s at row %d, x %d; want row %d, the column's x %d", d, b.Name, b.Row, b.X, r, columns[d][0].X)
					}
					if d > 0 && b.X <= columns[d-1][0].X+columns[d-1][0].W {
						t.Errorf("column %d starts at x %d, inside column %d", d, b.X, d-1)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("column %d: %v top to bottom; want %v", d, got, want)
				}
			}
			for i, a := range l.Boxes {
				for _, b := range l.Boxes[i+1:] {
					if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
						t.Errorf("boxes %s %+v and %s %+v overlap", a.Name, a, b.Name, b)
					}
				}
			}
			var edges []string
			for _, e := range l.Edges {
				edges = append(edges, e.From+">"+e.To)
				from, to := byName[e.From], byName[e.To]
				if e.X1 != from.X+from.W || e.Y1 != from.Y+from.H/2 || e.X2 != to.X || e.Y2 != to.Y+to.H/2 {
					t.Errorf("edge %s>%s from (%d,%d) to (%d,%d); want from %s's right side to %s's left side", e.From, e.To, e.X1, e.Y1, e.X2, e.Y2, e.From, e.To)
				}
				if want := fmt.Sprintf("M%d %d C", e.X1, e.Y1); len(e.Path) < len(want) || e.Path[:len(want)] != want {
					t.Errorf("edge %s>%s: path %q does not start at (%d,%d)", e.From, e.To, e.Path, e.X1, e.Y1)
				}
			}
			if !slices.Equal(edges, tc.edges) {
				t.Errorf("edges %v; want %v", edges, tc.edges)
			}
		})
	}
	if l := layoutGraph(nil); l.Width != 0 || len(l.Boxes) != 0 || len(l.Edges) != 0 {
		t.Errorf("no tasks: %+v; want an empty drawing", l)
	}
}
