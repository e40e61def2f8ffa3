// Package dataapis keeps the data APIs created and changed at runtime
// (docs/data-apis.md, "Lifecycle"): a SQLite store under state_dir of
// named APIs, each with numbered immutable versions (a version holds one
// route definition as canonical JSON) and a state (draft, published,
// offline). It owns the lifecycle's rules (which transitions are allowed,
// the bounds, which old version is evicted) and the seeding of the store
// from the configuration file's data routes under the precedence rule of
// docs/apps.md; it does not read definitions: the gateway checks each one
// with package config before it is stored or published, and turns the
// published versions (Store.Current) into ordinary routes of its table.
// It imports limits (the name rule) and statedb.
package dataapis

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/limits"
)

// State is what a data API serves.
type State string

// The states of a data API.
const (
	// Draft: no version was ever published; nothing serves.
	Draft State = "draft"
	// Published: version API.Published serves.
	Published State = "published"
	// Offline: nothing serves; API.Published is the version that last
	// served, which a publish without a version does not bring back by
	// itself (it takes the latest) but a rollback or publish can name.
	Offline State = "offline"
)

// Sources of a data API or a version: where it was defined.
const (
	SourceFile = "file" // a data route of the configuration file
	SourceAPI  = "api"  // the admin API
)

// Bounds of the store. They keep a rebuild of the routing table, which
// reads every published version, and the database bounded.
const (
	// MaxAPIs caps the data APIs in the store (file and API together).
	MaxAPIs = 1000
	// MaxVersions caps the versions kept per API. Adding one more evicts
	// the oldest version that is not the published (or, offline, the last
	// published) one.
	MaxVersions = 50
	// MaxDefinitionBytes caps one stored definition (config's cap on a
	// definition as sent, which its canonical form never exceeds by much).
	MaxDefinitionBytes = 512 << 10
	// MaxPageSize caps the APIs one List call returns; DefaultPageSize is
	// used when the caller asks for 0.
	MaxPageSize     = 1000
	DefaultPageSize = 100
)

// Version is one immutable definition of a data API.
type Version struct {
	// Version numbers start at 1 and are never reused within an API.
	Version int `json:"version"`
	// Source says whether the file (seeding) or the admin API made it.
	Source  string    `json:"source"`
	Created time.Time `json:"created"`
	// Definition is the route as the configuration file writes it (but
	// its name), canonical JSON.
	Definition json.RawMessage `json:"definition"`
}

// API is one data API with its lifecycle state.
type API struct {
	// Name is the route's name: one namespace with the file's routes.
	Name  string `json:"name"`
	State State  `json:"state"`
	// Published is the version that serves (State Published) or last
	// served (State Offline); 0 while a draft.
	Published int `json:"published_version"`
	// Latest is the highest version number made.
	Latest int `json:"latest_version"`
	// Source is where the API was first defined.
	Source string `json:"source"`
	// Overridden: a file API changed through the admin API since the
	// file last seeded it.
	Overridden bool `json:"overridden"`
	// PendingFileChange: the file's definition differs from the one last
	// seeded but was not applied (docs/apps.md, "Precedence").
	PendingFileChange bool      `json:"pending_file_change"`
	Created           time.Time `json:"created"`
	Updated           time.Time `json:"updated"`
	// Versions are the kept versions, oldest first (Get only; List
	// leaves them out).
	Versions []Version `json:"versions,omitempty"`
	// Nodes is what each live node serves of it (Get, cluster.etcd only).
	Nodes []NodeStatus `json:"nodes,omitempty"`
}

// Serving is one published data API as the routing table needs it.
type Serving struct {
	Name       string
	Version    int
	Definition []byte
}

// Errors of the store, classified with errors.Is.
var (
	// ErrNotFound: no data API (or no such version of it).
	ErrNotFound = errors.New("not found")
	// ErrExists: a data API of that name exists.
	ErrExists = errors.New("already exists")
	// ErrConflict: the call does not fit the API's state (taking offline
	// an API that does not serve, rolling back with nothing earlier) or
	// the store is full.
	ErrConflict = errors.New("conflict")
)

// Problem is one thing wrong with a data API's name or definition: the
// field's path in the definition ("data.sql") and what is wrong.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// InvalidError is a name or definition refused: by the store's own checks
// or, through the gateway, by package config's (every problem, in the
// definition's order).
type InvalidError struct {
	Problems []Problem
}

func (e *InvalidError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Field + ": " + p.Message
	}
	return strings.Join(lines, "; ")
}

func invalid(field, msg string) *InvalidError {
	return &InvalidError{Problems: []Problem{{Field: field, Message: msg}}}
}

// checkName refuses a name that is not a route name.
func checkName(name string) error {
	if !limits.ValidID(name) {
		return invalid("name", fmt.Sprintf("name %s, got %q", limits.IDRule, name))
	}
	return nil
}

// checkDefinition refuses what cannot be a stored definition: empty, too
// large, or not a JSON object.
func checkDefinition(def []byte) error {
	if len(def) > MaxDefinitionBytes {
		return invalid("definition", fmt.Sprintf("%d bytes; at most %d", len(def), MaxDefinitionBytes))
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(def, &m); err != nil || m == nil {
		return invalid("definition", "must be a JSON object")
	}
	return nil
}
