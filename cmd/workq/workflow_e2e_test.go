package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/workq/workq/consumer"
	"github.com/workq/workq/producer"
)

// workflowJSON is the part of `workq workflow get --json` the tests read.
type workflowJSON struct {
	ID     string         `json:"id"`
	State  string         `json:"state"`
	Counts map[string]int `json:"counts"`
	Tasks  []struct {
		ID            string   `json:"id"`
		Task          string   `json:"task"`
		State         string   `json:"state"`
		Parents       []string `json:"parents"`
		WaitingFor    []string `json:"waiting_for"`
		FailedParents []string `json:"failed_parents"`
	} `json:"tasks"`
}

// taskRows are the task rows of `workflow get`'s table, by task name, and the
// names in the order printed.
func taskRows(t *testing.T, out string) (map[string][]string, []string) {
	t.Helper()
	_, table, found := strings.Cut(out, "\n\n")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if !found || len(lines) < 2 || !strings.HasPrefix(lines[0], "TASK ") {
		t.Fatalf("no task table in:\n%s", out)
	}
	rows := map[string][]string{}
	var order []string
	cols := regexp.MustCompile(`\S+(?: \S+)*`) // cells are separated by two spaces or more
	for _, l := range lines[1:] {
		cells := cols.FindAllString(l, -1)
		rows[cells[0]] = cells
		order = append(order, cells[0])
	}
	return rows, order
}

// at is cell i of a row, "" if the row has none (or is missing).
func at(row []string, i int) string {
	if i < len(row) {
		return row[i]
	}
	return ""
}

// `workq workflow ls | get | wait | cancel`: a diamond that ends done, a workflow
// that fails (a task dead, its dependent cancelled) and one that runs until it is
// cancelled while `workflow wait` waits for it; tasks shown parents first, exit
// status 0 only for a workflow done.
//
// The tasks' rows are read once no record of the workflow is being written (after
// each task's own record says it ended, and with an AckWait long enough that no
// heartbeat rewrites a running task's record meanwhile): a workflow read while its
// records are written can miss one of them (see admin's TestWorkflows).
func TestWorkflowCommands(t *testing.T) {
	t.Parallel()
	q := "wfcli-" + strconv.FormatInt(time.Now().UnixNano(), 36) // its own on each run of the test binary's one server (-count)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	js := jsClient(t, serverURL)
	holding := make(chan struct{}, 1)
	quit := make(chan struct{}) // ends task hold when the test does
	w, err := consumer.New(ctx, js, q, consumer.HandlerFunc(func(ctx context.Context, j *consumer.Job) error {
		switch j.Task() {
		case "fail":
			return consumer.Permanent(errors.New("cannot do it\nsecond line"))
		case "hold":
			holding <- struct{}{}
			select { // until cancelled
			case <-ctx.Done():
				return ctx.Err()
			case <-quit:
				return errors.New("test over")
			}
		}
		return nil
	}), consumer.Concurrency(4), consumer.AckWait(30*time.Second), consumer.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	defer func() { close(quit); stop(); <-ran }()
	p, err := producer.New(ctx, js, q)
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(wf *producer.Workflow) []string {
		t.Helper()
		info, err := p.EnqueueWorkflow(ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // the next is enqueued measurably later
		return info.Tasks
	}
	// ended waits until each task's record says it ended.
	ended := func(tasks []string) {
		t.Helper()
		for _, id := range tasks {
			if _, err := p.Wait(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}

	tasks := enqueue(producer.NewWorkflow("ok").
		Task("d", producer.Job{}, producer.DependsOn("b", "c")).
		Task("c", producer.Job{}, producer.DependsOn("a")).
		Task("b", producer.Job{}, producer.DependsOn("a")).
		Task("a", producer.Job{}))
	if out := ok(t, "", "workflow", "wait", q, "ok"); !regexp.MustCompile(`(?m)^state +done$`).MatchString(out) {
		t.Errorf("workflow wait ok: want it done:\n%s", out)
	}
	ended(tasks)
	out := ok(t, "", "workflow", "wait", q, "ok")
	rows, order := taskRows(t, out)
	if !strings.Contains(out, "4: 4 done") || len(order) != 4 || order[0] != "a" || order[3] != "d" || at(rows["d"], 1) != "done" || at(rows["d"], 3) != "b,c" {
		t.Errorf("workflow wait ok: want 4 tasks done, a first and d last (parents first), d's parents b,c:\n%s", out)
	}

	ended(enqueue(producer.NewWorkflow("bad").
		Task("fail", producer.Job{}).
		Task("then", producer.Job{}, producer.DependsOn("fail"))))
	r := wq(t, "", "workflow", "wait", q, "bad")
	oneLine(t, r, 1, "workflow bad ended failed", "1 dead, 1 cancelled")
	rows, _ = taskRows(t, r.stdout)
	if got, want := strings.Join(rows["fail"], "|"), fmt.Sprintf("fail|dead|1/%d|-|-|-|permanent: cannot do it", consumer.DefaultMaxAttempts); got != want {
		t.Errorf("the failed task's row is %q:\n%s", got, r.stdout)
	}
	if got := strings.Join(rows["then"], "|"); got != "then|cancelled|0|fail|-|fail|cancelled: its parent task fail did not succeed" {
		t.Errorf("the cancelled dependent's row is %q:\n%s", got, r.stdout)
	}

	enqueue(producer.NewWorkflow("held").
		Task("hold", producer.Job{}).
		Task("after", producer.Job{}, producer.DependsOn("hold")))
	select {
	case <-holding:
	case <-ctx.Done():
		t.Fatal("task hold never started")
	}
	out = ok(t, "", "workflow", "get", q, "held")
	rows, _ = taskRows(t, out)
	if !strings.Contains(out, "running") || at(rows["hold"], 1) != "running" || at(rows["after"], 1) != "waiting" || at(rows["after"], 4) != "hold" {
		t.Errorf("workflow get held: want it running, hold running, after waiting for hold:\n%s", out)
	}
	if out := ok(t, "", "job", "get", q, "held.after"); !regexp.MustCompile(`(?m)^workflow +held$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^waiting for +hold$`).MatchString(out) {
		t.Errorf("job get of a task does not show its workflow and what it waits for:\n%s", out)
	}
	var wf workflowJSON
	okJSON(t, &wf, "workflow", "get", q, "held", "--json")
	if wf.ID != "held" || wf.State != "running" || len(wf.Tasks) != 2 || wf.Tasks[1].ID != "held.after" || !slices.Equal(wf.Tasks[1].WaitingFor, []string{"hold"}) || wf.Counts["waiting"] != 1 {
		t.Errorf("workflow get --json: %+v", wf)
	}
	out = ok(t, "", "workflow", "ls", q)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[1], "held ") || !strings.Contains(lines[1], "running") ||
		!strings.HasPrefix(lines[2], "bad ") || !strings.Contains(lines[2], "failed") || !strings.HasPrefix(lines[3], "ok ") || !strings.Contains(lines[3], "done") {
		t.Errorf("workflow ls: want held running, bad failed, ok done, newest first:\n%s", out)
	}
	var list []struct {
		ID     string         `json:"id"`
		State  string         `json:"state"`
		Tasks  int            `json:"tasks"`
		Counts map[string]int `json:"counts"`
	}
	okJSON(t, &list, "workflow", "ls", q, "--json")
	if len(list) != 3 || list[0].ID != "held" || list[0].Tasks != 2 || list[0].Counts["running"] != 1 || list[2].ID != "ok" || list[2].Counts["done"] != 4 {
		t.Errorf("workflow ls --json: %+v", list)
	}

	oneLine(t, wq(t, "", "workflow", "wait", q, "held", "--timeout", "500ms"), 1, "workflow held had not ended after 500ms")
	waiting := start(t, "workflow", "wait", q, "held", "--json")
	time.Sleep(200 * time.Millisecond) // the wait watches the records before the cancel (it would see the end anyway)
	if out := ok(t, "", "workflow", "cancel", q, "held"); !strings.Contains(out, "held: cancelled 2 of 2 task(s); now failed") {
		t.Errorf("workflow cancel held printed %q", out)
	}
	if code := waiting.wait(t, 30*time.Second); code != 1 || !strings.Contains(waiting.stderr(), "workflow held ended failed") ||
		json.Unmarshal([]byte(waiting.stdout()), &wf) != nil || wf.State != "failed" {
		t.Errorf("workflow wait across the cancel: exit %d, %s %s", code, waiting.stdout(), waiting.stderr())
	}

	oneLine(t, wq(t, "", "workflow", "cancel", q, "ok"), 1, "workflow ok not cancelled", "ended done")
	oneLine(t, wq(t, "", "workflow", "get", q, "nobody"), 1, "not found")
	oneLine(t, wq(t, "", "workflow", "wait", q, "nobody"), 1, "not found")
	oneLine(t, wq(t, "", "workflow", "get", q, "bad id"), 1, "invalid name")
	oneLine(t, wq(t, "", "workflow", "ls", "wfcli-ghost"), 1, "wfcli-ghost not found")
	oneLine(t, wq(t, "", "workflow", "wait", q, "ok", "--timeout", "-1s"), 2, "--timeout")
	oneLine(t, wq(t, "", "workflow", "get", q), 2, "want <queue> <id>")
}
