package ui

import (
	"cmp"
	"fmt"
	"slices"
)

// The drawing of a workflow's graph: a pure function from tasks to positioned boxes
// and edges, which the workflow page renders as inline SVG. Tasks stand in columns
// by depth — the longest path from a root, so that every task is right of all its
// parents — and within a column in the order of their parents' mean height (the
// barycentre heuristic, one pass left to right), which keeps most edges short and
// uncrossed. Columns are centred on the tallest one.

// The drawing's measures, in SVG user units (pixels at scale 1).
const (
	graphBoxW   = 168 // a task's box
	graphBoxH   = 48
	graphGapX   = 56 // between columns: room for the edges' curves
	graphGapY   = 16 // between the boxes of a column
	graphMargin = 8  // around the drawing: room for a box's outline
)

// graphTask is a task as the layout takes it: its name and its parents' names.
// Parents that are no task of the list are left out (records another client wrote,
// or that expired).
type graphTask struct {
	Name    string
	Parents []string
}

// graphBox is a task's place in the drawing: its column (depth), its row in the
// column and its box.
type graphBox struct {
	Name       string
	Depth, Row int
	X, Y, W, H int
}

// graphEdge is the line from a parent's box to a dependent's: from the middle of
// the parent's right side to the middle of the dependent's left side, as SVG path
// data (a cubic curve).
type graphEdge struct {
	From, To       string
	X1, Y1, X2, Y2 int
	Path           string
}

// graphLayout is a drawn graph: its size and its boxes, in the order of the tasks
// given, and its edges, by dependent in that order, then by parent in its order.
type graphLayout struct {
	Width, Height int
	Boxes         []graphBox
	Edges         []graphEdge
}

// layoutGraph places tasks in columns by depth and draws an edge from each parent
// to each dependent. Any list is drawn: a name given twice is drawn twice (its
// dependents' edges start at the first), and tasks on a cycle, which have no depth,
// share a column after the deepest.
func layoutGraph(tasks []graphTask) graphLayout {
	if len(tasks) == 0 {
		return graphLayout{}
	}
	index := make(map[string]int, len(tasks))
	for i, t := range tasks {
		if _, dup := index[t.Name]; !dup {
			index[t.Name] = i
		}
	}
	parents := make([][]int, len(tasks)) // known parents, by index
	for i, t := range tasks {
		for _, p := range t.Parents {
			if j, ok := index[p]; ok && j != i && !slices.Contains(parents[i], j) {
				parents[i] = append(parents[i], j)
			}
		}
	}
	depth := depths(parents)

	columns := slices.Max(depth) + 1
	byColumn := make([][]int, columns)
	for i, d := range depth {
		byColumn[d] = append(byColumn[d], i)
	}
	tallest := 0
	for _, c := range byColumn {
		tallest = max(tallest, len(c))
	}
	l := graphLayout{
		Width:  2*graphMargin + columns*graphBoxW + (columns-1)*graphGapX,
		Height: 2*graphMargin + tallest*graphBoxH + (tallest-1)*graphGapY,
		Boxes:  make([]graphBox, len(tasks)),
	}
	placed := make([]bool, len(tasks))
	for d, col := range byColumn {
		// Order the column by the mean centre of its placed parents; a task without
		// any keeps its place in the order given.
		key := make(map[int]float64, len(col))
		for pos, i := range col {
			sum, n := 0, 0
			for _, p := range parents[i] {
				if placed[p] {
					sum += l.Boxes[p].Y + graphBoxH/2
					n++
				}
			}
			key[i] = float64(pos) * (graphBoxH + graphGapY) // keeps the given order among the unparented
			if n > 0 {
				key[i] = float64(sum) / float64(n)
			}
		}
		slices.SortStableFunc(col, func(a, b int) int { return cmp.Or(cmp.Compare(key[a], key[b]), cmp.Compare(a, b)) })
		top := graphMargin + (tallest-len(col))*(graphBoxH+graphGapY)/2
		for row, i := range col {
			l.Boxes[i] = graphBox{
				Name: tasks[i].Name, Depth: d, Row: row,
				X: graphMargin + d*(graphBoxW+graphGapX), Y: top + row*(graphBoxH+graphGapY), W: graphBoxW, H: graphBoxH,
			}
		}
		for _, i := range col {
			placed[i] = true
		}
	}
	for i := range tasks {
		for _, p := range parents[i] {
			from, to := l.Boxes[p], l.Boxes[i]
			e := graphEdge{From: from.Name, To: to.Name, X1: from.X + from.W, Y1: from.Y + from.H/2, X2: to.X, Y2: to.Y + to.H/2}
			bend := graphGapX / 2
			e.Path = fmt.Sprintf("M%d %d C%d %d %d %d %d %d", e.X1, e.Y1, e.X1+bend, e.Y1, e.X2-bend, e.Y2, e.X2, e.Y2)
			l.Edges = append(l.Edges, e)
		}
	}
	return l
}

// depths is each task's longest path from a root (Kahn's order over the parents'
// indexes); tasks on a cycle get the depth after the deepest of the others.
func depths(parents [][]int) []int {
	n := len(parents)
	waiting := make([]int, n)
	dependents := make([][]int, n)
	for i, ps := range parents {
		waiting[i] = len(ps)
		for _, p := range ps {
			dependents[p] = append(dependents[p], i)
		}
	}
	depth := make([]int, n)
	done := make([]bool, n)
	var ready []int
	for i := range n {
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	deepest := 0
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		done[i] = true
		deepest = max(deepest, depth[i])
		for _, d := range dependents[i] {
			depth[d] = max(depth[d], depth[i]+1)
			if waiting[d]--; waiting[d] == 0 {
				ready = append(ready, d)
			}
		}
	}
	after := 0 // the cycles' column: after the deepest placed task, if there is one
	if slices.Contains(done, true) {
		after = deepest + 1
	}
	for i := range n {
		if !done[i] {
			depth[i] = after
		}
	}
	return depth
}
