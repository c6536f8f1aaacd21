package schedule

import "time"

// firingLayout writes a firing's time into its job id: UTC, to the second, with only
// characters a job id may hold.
const firingLayout = "20060102T150405Z"

// FiringID is the job id of the firing of schedule name at time at:
// "<name>/<UTC time as 20060102T150405Z>", e.g. "nightly-report/20261124T020000Z".
// The same firing always gets the same id, so the job id's dedup keeps it from
// running twice.
func FiringID(name string, at time.Time) string {
	return name + "/" + at.UTC().Format(firingLayout)
}

// MaxNameLen bounds a schedule's name so that its firings' ids stay within the
// 200 characters of a job id.
const MaxNameLen = 200 - len("/") - len(firingLayout)
