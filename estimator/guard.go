package estimator

import (
	"context"
	"fmt"
	"iter"
	"reflect"
	"runtime"

	"github.com/towerflow/towerflow/internal/guard"
)

// PanicError is a panic in code a run calls — the model function (Where
// names the tower), an input function or its sequence, a hook — recovered
// and returned as an error, so that it fails the call and not the process.
// errors.As finds it in the errors of Train, Evaluate and Predict; Stack is
// the panicking goroutine's stack.
type PanicError = guard.PanicError

// readInput calls input and returns its batches, run so that the input
// cannot crash the process: a panic in the input function or its sequence
// ends the sequence with a *PanicError naming the input (and with the
// stack), a nil sequence with an error naming it. A panic in the
// consumer's loop body is the consumer's own and goes on unwinding.
//
// A sequence that yields again after its consumer stopped it panics there,
// as a range loop makes it (that ends it); such a failure, which the
// consumer no longer reads, is what late returns once the sequence has
// returned (the consumer's wait for it, iter.Pull2's stop or prefetch's
// wait for its producer, orders the two).
func readInput(ctx context.Context, input InputFn) (seq iter.Seq2[Batch, error], late func() error) {
	var lateErr error
	where := "input " + funcName(input)
	seq = func(yield func(Batch, error) bool) {
		var src iter.Seq2[Batch, error]
		if err := guard.Call(where, "call", func() error { src = input(ctx); return nil }); err != nil {
			yield(Batch{}, err)
			return
		}
		if src == nil {
			yield(Batch{}, fmt.Errorf("%s returned a nil sequence", where))
			return
		}
		stopped := false
		err := func() (err error) {
			inConsumer := false
			defer func() {
				if inConsumer {
					return // not recovered: the panic goes on
				}
				if r := recover(); r != nil {
					err = guard.Caught(where, "read", r)
				}
			}()
			for b, berr := range src {
				inConsumer = true
				more := yield(b, berr)
				inConsumer = false
				if !more {
					stopped = true
					break
				}
			}
			return nil
		}()
		switch {
		case err == nil:
		case stopped:
			lateErr = fmt.Errorf("after the input was told to stop (a sequence must return once yield returns false): %w", err)
		default:
			yield(Batch{}, err)
		}
	}
	return seq, func() error { return lateErr }
}

// funcName is the name of the function fn, as the runtime knows it:
// "main.trainInput.func1".
func funcName(fn any) string {
	if f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()); f != nil {
		return f.Name()
	}
	return fmt.Sprintf("%T", fn)
}

// callHook calls one of h's methods, what, turning a panic inside it into a
// *PanicError naming the hook's type and the method.
func callHook(h any, what string, fn func() error) (err error) {
	defer guard.Recover(&err, hookName{h}, what)
	return fn()
}

// hookName names a hook by its type; the function of OnStep by its name.
type hookName struct{ h any }

func (n hookName) String() string {
	if f, ok := n.h.(funcHook); ok {
		return "OnStep function " + funcName(f.fn)
	}
	return fmt.Sprintf("hook %T", n.h)
}
