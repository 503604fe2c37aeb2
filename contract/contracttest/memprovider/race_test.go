//go:build race

package memprovider

// raceEnabled: this test binary runs under the race detector.
const raceEnabled = true
