//go:build !race

package dataformat

// allocSlack is how many allocations per row the allocation test forgives:
// none without the race detector.
const allocSlack = 0
