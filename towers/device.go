package towers

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/towerflow/towerflow/internal/parallel"
)

// Kind is the kind of a device.
type Kind int

const (
	// CPUKind is a CPU device: a tower on it runs on its own goroutine.
	CPUKind Kind = iota
	// GPUKind is a GPU device, as TensorFlow-style names give one.
	// towerflow has no GPU backend: LocalDevices never returns one, and
	// replicate rejects a tower on one.
	GPUKind
)

// String returns "CPU" or "GPU".
func (k Kind) String() string {
	switch k {
	case CPUKind:
		return "CPU"
	case GPUKind:
		return "GPU"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Device names one device of this host.
type Device struct {
	Kind  Kind
	Index int
}

// CPU returns the CPU device with index i.
func CPU(i int) Device { return Device{Kind: CPUKind, Index: i} }

// CPUs returns n CPU devices, of indices 0 to n-1: n towers on the CPU.
func CPUs(n int) []Device {
	out := make([]Device, n)
	for i := range out {
		out[i] = CPU(i)
	}
	return out
}

// GPU returns the GPU device with index i.
func GPU(i int) Device { return Device{Kind: GPUKind, Index: i} }

// String returns the canonical TensorFlow-style name, e.g. "/device:GPU:0".
func (d Device) String() string {
	return "/device:" + d.Kind.String() + ":" + strconv.Itoa(d.Index)
}

// ParseDevice parses a TensorFlow-style device name in any case:
// "/gpu:0", "/GPU:0", "/device:CPU:0", "gpu:1", "/job:localhost/replica:0/task:0/device:CPU:0".
// Job, replica and task parts are accepted and ignored: towerflow devices are
// local to one process.
func ParseDevice(s string) (Device, error) {
	parts := strings.Split(strings.Trim(strings.TrimSpace(s), "/"), "/")
	last := parts[len(parts)-1]
	for _, p := range parts[:len(parts)-1] {
		key, _, _ := strings.Cut(strings.ToLower(p), ":")
		if key != "job" && key != "replica" && key != "task" {
			return Device{}, fmt.Errorf("parse device %q: unknown part %q", s, p)
		}
	}
	fields := strings.Split(last, ":")
	if len(fields) == 3 && strings.EqualFold(fields[0], "device") {
		fields = fields[1:]
	}
	if len(fields) != 2 {
		return Device{}, fmt.Errorf("parse device %q: want a name like /device:CPU:0 or /gpu:1", s)
	}
	var d Device
	switch strings.ToUpper(fields[0]) {
	case "CPU":
		d.Kind = CPUKind
	case "GPU":
		d.Kind = GPUKind
	default:
		return Device{}, fmt.Errorf("parse device %q: unknown device type %q (want CPU or GPU)", s, fields[0])
	}
	i, err := strconv.Atoi(fields[1])
	if err != nil || i < 0 {
		return Device{}, fmt.Errorf("parse device %q: index %q is not a non-negative integer", s, fields[1])
	}
	d.Index = i
	return d, nil
}

// ParseDevices parses several device names (see ParseDevice); the first
// malformed one is an error.
func ParseDevices(names ...string) ([]Device, error) {
	out := make([]Device, len(names))
	for i, n := range names {
		d, err := ParseDevice(n)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// MustParseDevice is ParseDevice for constant names in programs; it panics on
// a malformed name.
func MustParseDevice(s string) Device {
	d, err := ParseDevice(s)
	if err != nil {
		panic(err)
	}
	return d
}

// numGPUs is the number of GPUs towers can run on: none, as towerflow has
// no GPU backend.
var numGPUs = func() int { return 0 }

// NumGPUs returns the number of GPUs towers can run on: 0, as towerflow
// has no GPU backend.
func NumGPUs() int { return numGPUs() }

// LocalDevices returns the devices towers run on by default: one CPU device
// per usable core (runtime.GOMAXPROCS(0), less the processor a training
// run holds spare: replicate.Engine.HoldProcessors).
//
// One CPU tower per core is the default because each tower runs its graph on
// one goroutine: most of gorgonia's kernels run on that goroutine alone, so
// one tower leaves the other cores idle outside matrix products (gonum's
// matrix multiply does spread over cores, and with -tags openblas each tower
// gets one BLAS thread). More towers than cores only add splitting and
// summing overhead. TensorFlow's replicate_model_fn used a single CPU device
// when there was no GPU; towerflow parallelises across cores.
func LocalDevices() []Device {
	if n := numGPUs(); n > 0 {
		out := make([]Device, n)
		for i := range out {
			out[i] = GPU(i)
		}
		return out
	}
	return CPUs(parallel.Cores())
}
