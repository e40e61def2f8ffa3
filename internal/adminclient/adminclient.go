// Package adminclient calls levee's admin API over HTTP: the client
// behind "levee apps". It knows the API's conventions (bearer token, JSON
// bodies, refusals as {"error", "reason"}) and nothing of the gateway.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxResponseBytes bounds a response body read (a page of 1000 apps is
// well under it).
const maxResponseBytes = 32 << 20

// DefaultTimeout bounds one call, connection included.
const DefaultTimeout = 10 * time.Second

// Client calls one admin listener. Safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client for the admin API at base ("http://127.0.0.1:9901"
// or a bare "host:port"). token, when not empty, is sent as
// "Authorization: Bearer TOKEN".
func New(base, token string) (*Client, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("admin address %q: want http://host:port", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: u, token: token, http: &http.Client{Timeout: DefaultTimeout}}, nil
}

// Error is a refusal from the admin API.
type Error struct {
	Status  int
	Reason  string // the stable snake_case reason, "" if the body had none
	Message string // the API's sentence, or the raw body
	Field   string // the field a 400 or 422 names, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", e.Status)
	if e.Reason != "" {
		b.WriteString(" " + e.Reason)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	return b.String()
}

// Do sends one request (body nil for none) to path, such as
// "/api/v1/apps", and returns the response body of a 2xx answer. Any other
// status is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	u := *c.base
	p, query, _ := strings.Cut(path, "?")
	u.Path += p
	u.RawQuery = query
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if len(raw) > maxResponseBytes {
		return nil, errors.New("the answer is larger than 32 MiB")
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return raw, nil
	}
	e := &Error{Status: resp.StatusCode}
	var doc struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
		Field  string `json:"field"`
	}
	if json.Unmarshal(raw, &doc) == nil && (doc.Error != "" || doc.Reason != "") {
		e.Reason, e.Message, e.Field = doc.Reason, doc.Error, doc.Field
	} else {
		e.Message = strings.TrimSpace(string(raw))
	}
	return nil, e
}
