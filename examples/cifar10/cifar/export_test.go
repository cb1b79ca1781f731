package cifar

// RunningWorkers returns the number of input workers that have started and
// not yet returned.
func RunningWorkers() int64 { return running.Load() }
