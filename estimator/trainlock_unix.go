//go:build unix

package estimator

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// tryLock takes an exclusive flock(2) lock on f without waiting, and
// reports whether it got it. The lock belongs to f's open file: another
// open of the same file, in this process too, cannot take it.
func tryLock(f *os.File) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, unix.EINTR):
			continue
		}
		return false, err
	}
}

// unlock gives up f's lock. Closing f alone would not when a child
// process holds a copy of f's descriptor — one inherited across a fork
// that has not yet reached its exec, or passed on on purpose — since the
// lock belongs to the open file that copy shares.
func unlock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_UN)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
