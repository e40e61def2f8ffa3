//go:build race

package proxy

// raceEnabled: the race detector is on (sync.Pool then drops a share of
// what is put back, so pooled objects are sometimes allocated anew).
const raceEnabled = true
