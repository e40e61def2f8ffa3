//go:build race

package dataformat

// allocSlack: under the race detector sync.Pool drops a share of what is
// put back (on purpose, to shake out reuse bugs), so encoding/json's pooled
// scanner behind json.RawMessage is sometimes allocated anew.
const allocSlack = 0.5
