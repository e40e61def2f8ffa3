package gateway

import (
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/proxy"
)

// proxyCompression maps a route's `compression` to the proxy's policy;
// nil when the route compresses nothing.
func proxyCompression(c *config.Compression) *proxy.Compression {
	if c == nil {
		return nil
	}
	pc := &proxy.Compression{Types: c.Types, MinBytes: c.MinBytes}
	switch c.Level {
	case "default":
		pc.Level = proxy.LevelDefault
	case "best":
		pc.Level = proxy.LevelBest
	default:
		pc.Level = proxy.LevelFast
	}
	for _, e := range c.Encodings {
		if pe := proxy.ParseEncoding(e); pe != proxy.EncodingNone {
			pc.Encodings = append(pc.Encodings, pe)
		}
	}
	return pc
}
