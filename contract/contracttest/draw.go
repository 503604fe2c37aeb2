package contracttest

import (
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path"
	"strconv"
	"testing"
)

// SeedEnv names the environment variable that replays the shapes of an
// earlier run (Config.Seed).
const SeedEnv = "CONTRACTTEST_SEED"

// runSeed is Config.Seed, else SeedEnv, else a new seed: every run draws
// new shapes, and a failure names the seed that replays them.
func runSeed(t *testing.T, seed uint64) uint64 {
	t.Helper()
	if seed != 0 {
		return seed
	}
	if s := os.Getenv(SeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("contracttest: %s=%q: want a positive integer, the seed a failed run named", SeedEnv, s)
		}
		return n
	}
	return rand.Uint64() | 1
}

// newDraw returns the rule's generator: seeded by the run's seed and the
// rule's name, so a rule draws the same shapes under the same seed
// whichever rules run before it (go test -run).
func newDraw(t *testing.T, seed uint64) *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(path.Base(t.Name())))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("this rule's shapes were drawn with seed %d: %s=%d go test -run '%s' draws them again", seed, SeedEnv, seed, t.Name())
		}
	})
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}
