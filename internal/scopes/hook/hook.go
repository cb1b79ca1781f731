// Package hook carries the plumbing of package towers to package scopes:
// towers imports it and sets Impl as it initializes, scopes (which
// imports towers, so runs after) gives it its type. It is a package of its
// own because towers cannot import scopes.
package hook

// Impl is set by package towers as it initializes: a value whose methods
// are the plumbing package scopes calls.
var Impl any
