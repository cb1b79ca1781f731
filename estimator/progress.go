package estimator

import (
	"context"
	"fmt"
	"io"

	"github.com/schollz/progressbar/v3"
)

// progressHook reports training progress: a progress bar on
// RunConfig.Progress when the caller gave one, else log lines every
// LogEvery steps.
func (e *Estimator) progressHook() Hook {
	if e.cfg.Progress != nil {
		return &ProgressBar{Out: e.cfg.Progress, Every: int64(e.cfg.LogEvery)}
	}
	return NewLoggingHook(int64(e.cfg.LogEvery))
}

// ProgressBar draws a progress bar of training steps on Out, with the loss
// and speed, refreshed every step and its loss shown every Every steps. It
// is meant for an interactive terminal.
type ProgressBar struct {
	BaseHook
	Out   io.Writer
	Every int64
	bar   *progressbar.ProgressBar
}

// Begin creates the bar; its length is the run's step limit when known.
func (h *ProgressBar) Begin(_ context.Context, info RunInfo) error {
	total := int64(-1)
	if info.LastStep >= 0 {
		total = info.LastStep - info.StartStep
	}
	h.bar = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(h.Out),
		progressbar.OptionSetDescription("train"),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("steps"),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(0),
	)
	return nil
}

// AfterStep advances the bar.
func (h *ProgressBar) AfterStep(_ context.Context, r StepResult) (bool, error) {
	if h.Every > 0 && r.Step%h.Every == 0 {
		h.bar.Describe(fmt.Sprintf("train step %d loss %.4g", r.Step, r.Loss))
	}
	return false, h.bar.Add(1)
}

// End finishes the bar.
func (h *ProgressBar) End(context.Context, RunInfo, error) error {
	if err := h.bar.Finish(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(h.Out)
	return err
}
