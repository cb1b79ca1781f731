package layers

import "sync"

// scratch lends the buffers an op needs only while it runs (a convolution's
// padded copies of its input and gradient, or its unfolded image): one set
// serves every op of every tower, so memory grows with the towers running
// at once, not with the layers of the model.
type scratch[T float] struct {
	mu   sync.Mutex
	free [][]T
}

var (
	scratch32 scratch[float32]
	scratch64 scratch[float64]
)

// borrow returns a buffer of n elements, its contents left from earlier
// use; giveBack returns it.
func borrow[T float](n int) []T {
	return scratchOf[T]().get(n)
}

func giveBack[T float](b ...[]T) {
	s := scratchOf[T]()
	for _, b := range b {
		s.put(b)
	}
}

func scratchOf[T float]() *scratch[T] {
	var zero T
	if _, ok := any(zero).(float32); ok {
		return any(&scratch32).(*scratch[T])
	}
	return any(&scratch64).(*scratch[T])
}

// get takes the smallest free buffer that holds n elements, or makes one.
func (s *scratch[T]) get(n int) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := -1
	for i, b := range s.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(s.free[best])) {
			best = i
		}
	}
	if best < 0 {
		return make([]T, n)
	}
	b := s.free[best]
	last := len(s.free) - 1
	s.free[best], s.free[last] = s.free[last], nil
	s.free = s.free[:last]
	return b[:n]
}

func (s *scratch[T]) put(b []T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free = append(s.free, b)
}
