// Command workq is the command-line face of workq: it enqueues jobs, runs shell
// commands as workers, inspects queues, job records and dead letters, takes
// distributed locks around commands, and runs an embedded server and a live demo.
//
// Run `workq --help` for the commands, and `workq completion --help` for shell
// completion.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:]))
}
