//go:build race

package sim

// raceDetector says the test binary has the race detector. Its runtime crashed
// (SIGSEGV in ThreadSanitizer's stack depot) a few seeds into a run here: every seed
// starts a server, its clients and the workers, thousands of goroutines, and the
// detector's tables for them do not last a run. The simulation runs without it in
// .ci/run; the worker's own tests in consumer run with it.
const raceDetector = true
