// Package openapi renders levee's routes as one OpenAPI 3.1 document: its
// one job. It is pure: the gateway describes every route (Document, built
// from the configuration, with a data route's column kinds as the
// database reported them) and Render writes the JSON, byte for byte the
// same for the same description (members in a fixed order, no maps
// iterated unsorted), so the document can be diffed and cached.
//
// OpenAPI has no prefix matching, while a levee route matches a path
// prefix: each route's path_prefix is written as the path itself, with
// "x-levee-path-prefix": true on its path item, and the operation's
// description says the route takes every path below it. Two routes with
// the same prefix and method (on different hosts) cannot share a path
// key: the later one is written under "<prefix>#<route name>". A brace,
// which OpenAPI would read as a path template, is written %7B or %7D.
// Whenever the key is not the prefix itself, "x-levee-path" gives it.
//
// Check verifies a rendered document against the rules of OpenAPI 3.1
// that can be checked without its JSON Schema (fixed fields, response
// codes, unique operationIds and parameters, resolvable $refs, security
// schemes); the tests run every rendered document through it.
package openapi
