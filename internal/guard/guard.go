// Package guard turns a panic in code the library runs but does not own —
// a model function, an input, a hook — into an error that says where it
// happened and what was being done, with the stack, so that it fails the
// call that ran the code and not the process.
package guard

import (
	"fmt"
	"runtime/debug"
)

// PanicError is a recovered panic, with where it happened.
type PanicError struct {
	// Where names the code: "tower 1 (/device:CPU:1)", "hook
	// *main.evalHook", "input main.readCSV.func1".
	Where string
	// What is what it was doing: "run", "build (train mode)",
	// "BeforeStep", "read".
	What  string
	Value any    // the value passed to panic
	Stack []byte // the stack of the panicking goroutine
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%s: panic during %s: %v", e.Where, e.What, e.Value)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Recover, deferred by the function that runs the code, turns a panic into
// a *PanicError in *err. where is asked for its name only then, so that a
// deferred Recover costs nothing on the way that does not panic.
func Recover(err *error, where fmt.Stringer, what string) {
	if r := recover(); r != nil {
		*err = Caught(where.String(), what, r)
	}
}

// Caught makes the *PanicError of value, just recovered by the caller's
// deferred function (recover works only there): the stack is the
// panicking goroutine's, still unwinding.
func Caught(where, what string, value any) *PanicError {
	return &PanicError{Where: where, What: what, Value: value, Stack: debug.Stack()}
}

// Call calls fn, turning a panic inside it into a *PanicError.
func Call(where, what string, fn func() error) (err error) {
	defer Recover(&err, name(where), what)
	return fn()
}

// name is a fixed name as a fmt.Stringer.
type name string

func (n name) String() string { return string(n) }
