package workflow

import (
	"github.com/workq/workq/internal/naming"
)

// TaskID is the job id of task in workflow wf: wf + "." + task. Workflow ids and task
// names are names (CheckName), so the id is its own token on the wire
// (internal/wireid) and the records of one workflow share the key prefix wf + ".".
func TaskID(wf, task string) string { return wf + "." + task }

// CheckName checks a workflow id or a task name (what says which): 1 to 64 letters,
// digits, '_' and '-', as queue names.
func CheckName(what, name string) error { return naming.Check(what, name) }
