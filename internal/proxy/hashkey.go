package proxy

import (
	"net/http"
	"strings"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
)

// pick chooses the endpoint for r: by the request's key on a
// consistent-hash upstream, else by the upstream's picker alone.
func pick(up *Balance, r *http.Request, client string) (*endpoint.Endpoint, error) {
	if up.HashOn != nil {
		if kp, ok := up.Picker.(balance.KeyPicker); ok {
			if key, found := requestKey(r, up.HashOn, client); found {
				return kp.PickKey(balance.HashKey(key))
			}
		}
	}
	return up.Picker.Pick()
}

// maxKeyBytes bounds the part of a header, cookie or query value that is
// hashed.
const maxKeyBytes = 1024

// requestKey extracts the hash key h names from r; found is false when the
// request does not carry it.
func requestKey(r *http.Request, h *HashOn, client string) (key string, found bool) {
	switch h.Kind {
	case "header":
		v := r.Header[h.Name]
		if len(v) == 0 || v[0] == "" {
			return "", false
		}
		key = v[0]
	case "cookie":
		c, err := r.Cookie(h.Name)
		if err != nil || c.Value == "" {
			return "", false
		}
		key = c.Value
	case "query":
		v, ok := queryValue(r.URL.RawQuery, h.Name)
		if !ok || v == "" {
			return "", false
		}
		key = v
	case "client_ip":
		key = clientHost(client)
		if key == "" {
			return "", false
		}
	case "path":
		key = r.URL.Path
	default:
		return "", false
	}
	if len(key) > maxKeyBytes {
		key = key[:maxKeyBytes]
	}
	return key, true
}

// queryValue returns the raw (still escaped) value of the first name=
// pair in a raw query string, without building url.Values. Work is one
// pass over the query.
func queryValue(raw, name string) (string, bool) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(pair, "=")
		if k == name {
			return v, true
		}
	}
	return "", false
}
