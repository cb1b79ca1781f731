package estimator

// progressHook reports training progress through log lines.
func (e *Estimator) progressHook() Hook { return NewLoggingHook(int64(e.cfg.LogEvery)) }
