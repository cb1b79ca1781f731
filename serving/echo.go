package serving

// Quoting a request's own input in an error message: at most maxEcho
// bytes of it, so that an error is never as large as the input it names.

import (
	"fmt"
	"unicode/utf8"
)

// maxEcho is the most bytes of one piece of a request's input (a
// signature, model, label or feature name, a version, a path, a JSON
// value) an error message quotes.
const maxEcho = 256

// echo returns s for an error message: whole when it is at most maxEcho
// bytes, else its first maxEcho bytes (cut between UTF-8 characters)
// followed by "… (N bytes)", N being s's length.
func echo(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", clip(s, maxEcho), len(s))
}

// clip returns the longest prefix of s of at most n bytes that does not
// cut a UTF-8 character.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
