//go:build mpi

package collective

/*
#cgo pkg-config: ompi-c
#include <mpi.h>
#include <stdlib.h>

// OpenMPI's handles and constants are macros over its globals, which cgo
// cannot name: these return them.
static MPI_Comm tf_comm_world(void) { return MPI_COMM_WORLD; }
static MPI_Errhandler tf_errors_return(void) { return MPI_ERRORS_RETURN; }

static int tf_init_thread(int *provided) {
	return MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, provided);
}

static int tf_iallreduce(void *buf, int count, int f32, MPI_Comm comm, MPI_Request *req) {
	return MPI_Iallreduce(MPI_IN_PLACE, buf, count, f32 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, comm, req);
}

static int tf_ibcast(void *buf, int count, int root, MPI_Comm comm, MPI_Request *req) {
	return MPI_Ibcast(buf, count, MPI_BYTE, root, comm, req);
}

// tf_iallgatherv gathers in place into buf: type 0 is int64, 1 float32,
// 2 float64.
static int tf_iallgatherv(void *buf, const int *counts, const int *displs, int type, MPI_Comm comm, MPI_Request *req) {
	MPI_Datatype t = type == 0 ? MPI_INT64_T : type == 1 ? MPI_FLOAT : MPI_DOUBLE;
	return MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, t, comm, req);
}

static int tf_test(MPI_Request *req, int *done) {
	return MPI_Test(req, done, MPI_STATUS_IGNORE);
}

// tf_error_string writes code's text, NUL-terminated, into buf of
// MPI_MAX_ERROR_STRING+1 chars.
static int tf_error_string(int code, char *buf) {
	int n = 0;
	int rc = MPI_Error_string(code, buf, &n);
	if (rc != MPI_SUCCESS || n < 0 || n > MPI_MAX_ERROR_STRING) {
		n = 0;
	}
	buf[n] = 0;
	return rc;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// maxCount is the most elements one MPI call takes (its count is a C int);
// longer buffers go in chunks. A variable so that tests can make it small.
var maxCount = math.MaxInt32

// The polling of a running collective (see mpiComm.wait).
const (
	spinFor   = 20 * time.Millisecond
	pollSleep = time.Millisecond
)

// mpiState is the process's one MPI Comm, made by the first MPI().
var mpiState struct {
	mu   sync.Mutex
	comm *mpiComm
	err  error // why the first MPI() failed; every later one returns it
}

// MPI joins the group of processes that mpirun started: rank and size are
// those of MPI_COMM_WORLD. The first call initializes MPI (unless the
// program already did) asking for MPI_THREAD_MULTIPLE and accepting
// MPI_THREAD_SERIALIZED (the Comm makes one MPI call at a time, from
// whichever OS thread its goroutine is on); later calls return the same
// Comm, and an error once it is closed. The Comm works on its own duplicate
// of MPI_COMM_WORLD, whose errors MPI returns instead of aborting.
//
// Errors before the duplicate exists (MPI_Init_thread, MPI_Comm_dup) are
// MPI_COMM_WORLD's, whose handler by default aborts the process.
//
// Unless the environment says otherwise, MPI() sets OpenMPI's
// OMPI_MCA_coll_libnbc_iallreduce_algorithm to 3 (Rabenseifner) before it
// initializes MPI: the default algorithm of the non-blocking all-reduce,
// which the Comm uses to stay cancellable, is up to twice as slow as the
// blocking one.
func MPI() (Comm, error) {
	mpiState.mu.Lock()
	defer mpiState.mu.Unlock()
	if c := mpiState.comm; c != nil {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return nil, errors.New("collective: MPI's Comm was closed, which finalized MPI: a process cannot start it again")
		}
		return c, nil
	}
	if mpiState.err != nil {
		return nil, mpiState.err
	}
	c, err := startMPI()
	if err != nil {
		mpiState.err = err
		return nil, err
	}
	mpiState.comm = c
	return c, nil
}

// iallreduceAlgorithm is the OpenMPI setting MPI() gives the
// non-blocking all-reduce unless the environment names one: OpenMPI 4's
// default algorithm for MPI_Iallreduce takes 1.3 to 2 times as long as a
// blocking MPI_Allreduce from 128 KiB up (cmd/allreducebench, 2 ranks);
// Rabenseifner's (3) is within a few per cent of it.
const iallreduceAlgorithm = "OMPI_MCA_coll_libnbc_iallreduce_algorithm"

// startMPI initializes MPI if need be and makes the Comm.
func startMPI() (*mpiComm, error) {
	if _, set := os.LookupEnv(iallreduceAlgorithm); !set {
		if err := os.Setenv(iallreduceAlgorithm, "3"); err != nil {
			return nil, fmt.Errorf("collective: %w", err)
		}
	}
	var flag C.int
	if rc := C.MPI_Finalized(&flag); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Finalized", rc)
	}
	if flag != 0 {
		return nil, errors.New("collective: MPI was already finalized: a process cannot start it again")
	}
	if rc := C.MPI_Initialized(&flag); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Initialized", rc)
	}
	c := &mpiComm{finalize: flag == 0, poll: new(mpiPoll)}
	var provided C.int
	if c.finalize {
		if rc := C.tf_init_thread(&provided); rc != C.MPI_SUCCESS {
			return nil, mpiError("MPI_Init_thread", rc)
		}
	} else if rc := C.MPI_Query_thread(&provided); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Query_thread", rc)
	}
	if provided < C.MPI_THREAD_SERIALIZED {
		return nil, fmt.Errorf("collective: MPI provides only %s; towerflow needs MPI_THREAD_SERIALIZED or better, since a goroutine moves between OS threads", threadLevel(provided))
	}
	if rc := C.MPI_Comm_dup(C.tf_comm_world(), &c.comm); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Comm_dup(MPI_COMM_WORLD)", rc)
	}
	if rc := C.MPI_Comm_set_errhandler(c.comm, C.tf_errors_return()); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)", rc)
	}
	var rank, size C.int
	if rc := C.MPI_Comm_rank(c.comm, &rank); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Comm_rank", rc)
	}
	if rc := C.MPI_Comm_size(c.comm, &size); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Comm_size", rc)
	}
	c.rank, c.size = int(rank), int(size)
	return c, nil
}

func threadLevel(l C.int) string {
	switch l {
	case C.MPI_THREAD_SINGLE:
		return "MPI_THREAD_SINGLE"
	case C.MPI_THREAD_FUNNELED:
		return "MPI_THREAD_FUNNELED"
	case C.MPI_THREAD_SERIALIZED:
		return "MPI_THREAD_SERIALIZED"
	case C.MPI_THREAD_MULTIPLE:
		return "MPI_THREAD_MULTIPLE"
	}
	return fmt.Sprintf("thread level %d", int(l))
}

// mpiError is the error of an MPI call that returned rc: the call and
// MPI's text for rc.
func mpiError(call string, rc C.int) error {
	return fmt.Errorf("collective: %s: %s", call, errorText(rc))
}

// errorText is MPI's text for the error code rc. MPI_Error_string is an MPI
// call: the caller holds the Comm's lock, or no Comm exists yet.
func errorText(rc C.int) string {
	var buf [C.MPI_MAX_ERROR_STRING + 1]C.char
	if C.tf_error_string(rc, &buf[0]) == C.MPI_SUCCESS && buf[0] != 0 {
		return C.GoString(&buf[0])
	}
	return fmt.Sprintf("MPI error %d", int(rc))
}

// opError is the error of the MPI call that failed with rc in collective
// o (or in Close).
func (c *mpiComm) opError(o fmt.Stringer, call string, rc C.int) error {
	return fmt.Errorf("collective: rank %d, %s: %s: %s", c.rank, o, call, errorText(rc))
}

// op names a collective in errors; formatted only for one.
type op struct {
	kind string // "all-reduce float64", "all-reduce float32", "broadcast"
	root int    // of a broadcast
	n    int    // elements
}

func (o op) String() string {
	if o.kind == "broadcast" {
		return fmt.Sprintf("broadcast from rank %d of %d bytes", o.root, o.n)
	}
	return fmt.Sprintf("%s of %d elements", o.kind, o.n)
}

// text is a fixed name for opError.
type text string

func (t text) String() string { return string(t) }

// mpiComm is the Comm of MPI(). Its lock is held for the whole of each
// collective, so that every MPI call of the Comm is made by one goroutine
// at a time (MPI_THREAD_SERIALIZED).
type mpiComm struct {
	rank, size int
	finalize   bool // whether Close finalizes MPI (MPI() initialized it)

	mu     sync.Mutex
	comm   C.MPI_Comm
	broken error // the first failed collective; every later call returns it
	closed bool
	// The running collective's request and test flag, and the pin on its
	// buffer, kept here so that a collective allocates nothing (cgo moves
	// a local whose address C gets to the heap). A buffer left to MPI by a
	// collective that broke the Comm stays pinned, and alive, for good.
	poll *mpiPoll
	pin  runtime.Pinner
	// gatherv is an all-gather's counts and displacements, size C ints
	// each, in C memory (MPI reads them until the collective completes);
	// made by the first all-gather.
	gatherv *C.int
}

// mpiPoll is what MPI writes while a collective runs: memory without Go
// pointers, as cgo requires of what a C function gets a pointer to.
type mpiPoll struct {
	req  C.MPI_Request
	done C.int
}

func (c *mpiComm) Rank() int { return c.rank }
func (c *mpiComm) Size() int { return c.size }

func (c *mpiComm) AllReduceFloat64(ctx context.Context, buf []float64) error {
	if len(buf) == 0 {
		return c.check()
	}
	return c.run(ctx, op{"all-reduce float64", 0, len(buf)}, "MPI_Iallreduce", unsafe.Pointer(&buf[0]), 8, func(p unsafe.Pointer, n C.int, req *C.MPI_Request) C.int {
		return C.tf_iallreduce(p, n, 0, c.comm, req)
	})
}

func (c *mpiComm) AllReduceFloat32(ctx context.Context, buf []float32) error {
	if len(buf) == 0 {
		return c.check()
	}
	return c.run(ctx, op{"all-reduce float32", 0, len(buf)}, "MPI_Iallreduce", unsafe.Pointer(&buf[0]), 4, func(p unsafe.Pointer, n C.int, req *C.MPI_Request) C.int {
		return C.tf_iallreduce(p, n, 1, c.comm, req)
	})
}

func (c *mpiComm) Broadcast(ctx context.Context, root int, buf []byte) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("collective: broadcast from rank %d in a group of %d", root, c.size)
	}
	if len(buf) == 0 {
		return c.check()
	}
	return c.run(ctx, op{"broadcast", root, len(buf)}, "MPI_Ibcast", unsafe.Pointer(&buf[0]), 1, func(p unsafe.Pointer, n C.int, req *C.MPI_Request) C.int {
		return C.tf_ibcast(p, n, C.int(root), c.comm, req)
	})
}

func (c *mpiComm) AllGatherInt64(ctx context.Context, buf []int64, counts []int) error {
	return mpiGather(ctx, c, "all-gather int64", 0, buf, counts)
}

func (c *mpiComm) AllGatherFloat32(ctx context.Context, buf []float32, counts []int) error {
	return mpiGather(ctx, c, "all-gather float32", 1, buf, counts)
}

func (c *mpiComm) AllGatherFloat64(ctx context.Context, buf []float64, counts []int) error {
	return mpiGather(ctx, c, "all-gather float64", 2, buf, counts)
}

// mpiGather runs MPI_Iallgatherv in place on buf, of elements of C type
// typ (see tf_iallgatherv). The displacements are C ints, so the whole
// gather must fit in one MPI count: a larger one is an error before any
// MPI call, on every rank alike (they all pass the same counts).
func mpiGather[T any](ctx context.Context, c *mpiComm, kind string, typ C.int, buf []T, counts []int) error {
	if err := checkGather(kind, c.size, len(buf), counts); err != nil {
		return err
	}
	if len(buf) == 0 {
		return c.check()
	}
	if len(buf) > maxCount {
		return fmt.Errorf("collective: rank %d, %s of %d elements: more than one MPI call takes (%d); gather less at a time", c.rank, kind, len(buf), maxCount)
	}
	var zero T
	return c.run(ctx, op{kind, 0, len(buf)}, "MPI_Iallgatherv", unsafe.Pointer(&buf[0]), int(unsafe.Sizeof(zero)), func(p unsafe.Pointer, _ C.int, req *C.MPI_Request) C.int {
		if c.gatherv == nil {
			c.gatherv = (*C.int)(C.malloc(C.size_t(2 * c.size * C.sizeof_int)))
		}
		arr := unsafe.Slice(c.gatherv, 2*c.size)
		off := 0
		for r, n := range counts {
			arr[r], arr[c.size+r] = C.int(n), C.int(off)
			off += n
		}
		return C.tf_iallgatherv(p, &arr[0], &arr[c.size], typ, c.comm, req)
	})
}

// check returns the error that broke or closed the Comm, if any.
func (c *mpiComm) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.broken
}

// run does collective o on o.n elements of size bytes at p, in chunks of
// at most maxCount elements: start begins one chunk's non-blocking
// collective (the MPI function call). Any failure breaks the Comm.
func (c *mpiComm) run(ctx context.Context, o op, call string, p unsafe.Pointer, size int, start func(p unsafe.Pointer, n C.int, req *C.MPI_Request) C.int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return c.broken
	}
	if err := ctx.Err(); err != nil {
		c.broken = fmt.Errorf("collective: rank %d did not start MPI %s: %w; the Comm is broken (the other ranks may be in it)", c.rank, o, err)
		return c.broken
	}
	c.pin.Pin(p)
	for off := 0; off < o.n; off += maxCount {
		count := min(maxCount, o.n-off)
		if rc := start(unsafe.Add(p, off*size), C.int(count), &c.poll.req); rc != C.MPI_SUCCESS {
			c.broken = c.opError(o, call, rc)
			c.pin.Unpin()
			return c.broken
		}
		if err := c.wait(ctx, o); err != nil {
			c.broken = err
			if ctx.Err() == nil { // else MPI may still write p: it stays pinned
				c.pin.Unpin()
			}
			return err
		}
	}
	c.pin.Unpin()
	return nil
}

// wait tests c.poll.req until it completes, fails, or ctx is done.
//
// MPI moves a non-blocking collective along only inside MPI calls (no
// progress thread), so waiting is testing. For the first spinFor (20 ms)
// wait tests in a loop, yielding to other goroutines between tests
// (runtime.Gosched): that holds a core, as a blocking MPI call would, and
// sees completion within a test (a microsecond or so); a blocking
// MPI_Allreduce's own algorithm is faster than MPI_Iallreduce's, polled or
// not (cmd/allreducebench). After spinFor, wait sleeps pollSleep (1 ms)
// between tests, to leave the core to others while a slow rank keeps the
// group waiting: a collective that takes longer than spinFor ends up to
// about 1.1 ms later than it could, and may lose up to that at each step of
// its algorithm reached while sleeping (a shorter sleep would not help: Go
// wakes a sleeper with nothing else to run after about 1.1 ms at best on
// Linux). A cancelled ctx is noticed at the next test.
func (c *mpiComm) wait(ctx context.Context, o op) error {
	begin := time.Now()
	for {
		if rc := C.tf_test(&c.poll.req, &c.poll.done); rc != C.MPI_SUCCESS {
			return c.opError(o, "MPI_Test", rc)
		}
		if c.poll.done != 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("collective: rank %d left MPI %s unfinished: %w; the Comm is broken (an MPI collective cannot be cancelled)", c.rank, o, err)
		}
		if time.Since(begin) < spinFor {
			runtime.Gosched()
			continue
		}
		time.Sleep(pollSleep)
	}
}

// Close frees the Comm's communicator and, if MPI() initialized MPI,
// finalizes it; MPI_Finalize waits for every rank to finalize. A second
// Close does nothing. A broken Comm is not finalized (that would wait for
// the collective it left running): Close returns why it broke, and the
// process should exit (non-zero, so that mpirun stops the others).
func (c *mpiComm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.broken != nil {
		return fmt.Errorf("collective: MPI not finalized, the Comm broke: %w", c.broken)
	}
	c.broken = fmt.Errorf("collective: rank %d: MPI's Comm is closed", c.rank)
	var errs []error
	if rc := C.MPI_Comm_free(&c.comm); rc != C.MPI_SUCCESS {
		errs = append(errs, c.opError(text("close"), "MPI_Comm_free", rc))
	}
	if c.gatherv != nil {
		C.free(unsafe.Pointer(c.gatherv))
		c.gatherv = nil
	}
	if c.finalize {
		if rc := C.MPI_Finalize(); rc != C.MPI_SUCCESS {
			errs = append(errs, c.opError(text("close"), "MPI_Finalize", rc))
		}
	}
	return errors.Join(errs...)
}
