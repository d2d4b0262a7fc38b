//go:build race

package sim

// raceDetector: the race detector slows the single-goroutine simulator
// about eightfold and finds nothing in it, so seeds run shorter under it.
const raceDetector = true
