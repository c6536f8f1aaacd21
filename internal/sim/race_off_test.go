//go:build !race

package sim

// raceDetector says the test binary has the race detector (see race_on_test.go).
const raceDetector = false
