package config

import "github.com/levee-gw/levee/internal/config/engine"

// Each block's file holds the one description of its fields, its table
// (engine.Block of engine.Field): for each block, its fields in the walker's order (of two names equally close to a
// misspelt key, "did you mean" offers the earlier), each with its
// name, kind, bounds, default and a doc line. The walker takes a block's
// allowed keys (and so its "did you mean" candidates) from here, reads
// every field that has a bind generically (engine.Parser.Bind: kind, bounds, whether
// it is required or may be empty and the messages then, and its own
// check), and the JSON Schema in deploy/levee.schema.json is generated
// from the same tables (engine.Schema). A field's default is its entry's Def
// (the exported Default* constant it names): the default* constructors
// that the reader starts from take it from the table (engine.WithDefaults), so
// that the two cannot drift (TestFieldDefaults, and
// TestFieldTableDrivesDefaultsReloadAndDocs against Parse). So does
// whether a reload applies a change to the field (Reload: ReloadRefusals)
// and docs/configuration.md's field reference (engine.Reference).
// Cross-field rules run in the block's reader once p.Bind has read it,
// consulting the set of fields p.Bind found missing or invalid.
//
// Every field that is a value has a bind. A field without one is read by
// hand in its block's file, for the reason given (its entry
// still gives the schema its kind and bounds):
//   - lists whose items are checked against each other (duplicates) or
//     against other parts of the file: admin.tokens, discovery.etcd.endpoints,
//     upstreams.*.endpoints (required unless discovery is set), retry.on
//     (conditions or statuses), health_check.http.expect, zones.failover
//     (not the local zone), routes, match.methods, forward_trailers,
//     upgrades, apps, api_key_sha256 (unique across apps) and grants
//     (routes of the file);
//   - maps of named blocks: upstreams, apps[].route_limits (keys are grants);
//   - limits.max_concurrency, of two forms whose kind decides min, max
//     and max_queue's default;
//   - blocks with a rule across their fields or with a field above, whose
//     reader runs p.Bind and then the rule: admin (omitted, it reports
//     admin.listen), memory (soft below hard watermark), least_request and
//     consistent_hash (only with their balancer), discovery (exactly one
//     source), etcd, retry (an upstream's or a route's, which refuses
//     budget), backoff (max at least base), limits, health_check (http or
//     tcp; timeout at most interval), http, outlier_detection (ejection
//     times), zones, match (its methods feed the overlap check),
//     anonymous_limits (only with auth none), apps[].limits (burst
//     needs rate; burst/rate bounded) and upstreams.*.tls (cert_file with
//     key_file, the files parsed, min_version read by hand as a number or
//     a string);
//   - a route's headers (set, add and remove checked against each other),
//     redirect (to against https), respond (body against status) and cors
//     (origins normalised and distinct; "*" not with credentials).

// parser walks a YAML node tree into a Config, collecting every problem
// instead of stopping at the first: the engine's generic reader, with the
// block readers (methods in each block's file). A parser is used for one
// Parse call.
type parser struct {
	*engine.Parser
}

// maxFileBytes bounds the file Parse reads (engine.MaxDepth and
// engine.MaxErrors bound the rest of the work on hostile input).
const maxFileBytes = 4 << 20
