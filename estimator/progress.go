package estimator

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
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

// ProgressBar draws a progress bar of training on Out, one line redrawn in
// place (each drawing begins with a carriage return), for an interactive
// terminal:
//
//	train  62% [==================            ] 500/800, 97 steps/s, 3s left, loss 0.012346
//
// It counts global steps toward the run's last step: a run resumed from a
// checkpoint at step 400 with MaxSteps(800) starts at 400/800, and its
// speed and time left count only the steps this run takes. Without a step
// limit it shows the global step alone. The loss is shown every Every
// steps. A run that ends early — its context cancelled (Ctrl-C), an
// error — leaves the bar at the step it reached, marked "stopped", not at
// 100%. The bar is redrawn at most every tenth of a second, at every
// Every-th step, and when the run ends.
type ProgressBar struct {
	BaseHook
	Out   io.Writer
	Every int64

	start, last, step int64 // global steps: the run's first, its limit (-1: none), the latest
	loss              float64
	haveLoss          bool
	began, drawn      time.Time
	width             int // of the line last drawn, to blank what a shorter one leaves
}

const (
	progressWidth  = 30                     // characters of the bar
	progressRedraw = 100 * time.Millisecond // the shortest time between drawings
)

// Begin draws the bar at the run's starting step.
func (h *ProgressBar) Begin(_ context.Context, info RunInfo) error {
	if h.Out == nil {
		return fmt.Errorf("progress bar: nil Out")
	}
	h.start, h.last, h.step, h.haveLoss, h.width = info.StartStep, info.LastStep, info.StartStep, false, 0
	h.began = time.Now()
	return h.draw(false, false)
}

// AfterStep advances the bar.
func (h *ProgressBar) AfterStep(_ context.Context, r StepResult) (bool, error) {
	h.step = r.Step
	due := time.Since(h.drawn) >= progressRedraw || r.Step == h.last
	if h.Every > 0 && r.Step%h.Every == 0 {
		h.loss, h.haveLoss, due = r.Loss, true, true
	}
	if !due {
		return false, nil
	}
	return false, h.draw(false, false)
}

// End draws the bar where the run ended and ends its line.
func (h *ProgressBar) End(_ context.Context, _ RunInfo, cause error) error {
	return h.draw(true, cause != nil)
}

// draw writes the bar over the previous drawing; the last drawing of a
// run ends the line.
func (h *ProgressBar) draw(last, stopped bool) error {
	line := h.line(stopped)
	pad := max(h.width-len(line), 0)
	h.width, h.drawn = len(line), time.Now()
	end := ""
	if last {
		end = "\n"
	}
	_, err := fmt.Fprintf(h.Out, "\r%s%s%s", line, strings.Repeat(" ", pad), end)
	if err != nil {
		return fmt.Errorf("progress bar: %w", err)
	}
	return nil
}

// line is the bar as it stands; a stopped run's says so.
func (h *ProgressBar) line(stopped bool) string {
	var b strings.Builder
	if h.last > 0 {
		done := min(max(h.step, 0), h.last)
		filled := int(done * progressWidth / h.last)
		fmt.Fprintf(&b, "train %3d%% [%s%s] %d/%d", done*100/h.last,
			strings.Repeat("=", filled), strings.Repeat(" ", progressWidth-filled), h.step, h.last)
	} else {
		fmt.Fprintf(&b, "train step %d", h.step)
	}
	if done, secs := h.step-h.start, time.Since(h.began).Seconds(); done > 0 && secs > 0 {
		perSec := float64(done) / secs
		fmt.Fprintf(&b, ", %v steps/s", rate(perSec))
		if h.last > h.step && !stopped {
			left := time.Duration(float64(h.last-h.step) / perSec * float64(time.Second))
			fmt.Fprintf(&b, ", %v left", left.Round(time.Second))
		}
	}
	if h.haveLoss {
		fmt.Fprintf(&b, ", loss %v", roundMetric(h.loss))
	}
	if stopped {
		b.WriteString(", stopped")
	}
	return b.String()
}
