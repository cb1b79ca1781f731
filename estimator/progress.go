package estimator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// progressHook reports training progress: a progress bar on
// RunConfig.Progress when the caller gave one, else log lines every
// LogEvery steps, after the first step and at least every LogInterval.
func (e *Estimator) progressHook() Hook {
	if e.bar != nil {
		return e.bar
	}
	return &LoggingHook{Every: int64(e.cfg.LogEvery), Interval: e.cfg.LogInterval}
}

// barLogger returns log, whose records go around bar when one is drawn:
// the bar's line is blanked before a record and drawn again after it, so
// that a log line written to the same terminal does not run on from the
// bar.
func barLogger(log *slog.Logger, bar *ProgressBar) *slog.Logger {
	return slog.New(&barHandler{inner: log.Handler(), bar: bar})
}

// barHandler is barLogger's handler.
type barHandler struct {
	inner slog.Handler
	bar   *ProgressBar
}

func (h *barHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *barHandler) Handle(ctx context.Context, r slog.Record) error {
	h.bar.mu.Lock()
	defer h.bar.mu.Unlock()
	if !h.bar.active {
		return h.inner.Handle(ctx, r)
	}
	h.bar.blank()
	err := h.inner.Handle(ctx, r)
	h.bar.drawLocked(false, false) // the error that matters is the record's
	return err
}

func (h *barHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &barHandler{inner: h.inner.WithAttrs(as), bar: h.bar}
}

func (h *barHandler) WithGroup(name string) slog.Handler {
	return &barHandler{inner: h.inner.WithGroup(name), bar: h.bar}
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
// Every-th step, and when the run ends. A line wider than Width drops the
// loss, then the time left, then the speed, then narrows the bar.
//
// With RunConfig.Progress the Estimator draws one, and its log records go
// around it: the bar is blanked before each and drawn again after.
type ProgressBar struct {
	BaseHook
	Out   io.Writer
	Every int64
	// Width is the most characters a line may take; 0 means the width of
	// the terminal Out is, less one, or 79 when Out is not a terminal.
	Width int

	mu                sync.Mutex // drawing, from the hook and from log records
	active            bool       // a line is drawn and not ended
	start, last, step int64      // global steps: the run's first, its limit (-1: none), the latest
	loss              float64
	haveLoss          bool
	began, drawn      time.Time
	width             int // of the line last drawn, to blank what a shorter one leaves
}

const (
	progressWidth  = 30                     // characters of the bar, at most
	progressRedraw = 100 * time.Millisecond // the shortest time between drawings
)

// maxWidth is the widest line the bar may draw.
func (h *ProgressBar) maxWidth() int {
	if h.Width > 0 {
		return h.Width
	}
	if f, ok := h.Out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 1 {
			return w - 1
		}
	}
	return 79
}

// Begin draws the bar at the run's starting step.
func (h *ProgressBar) Begin(_ context.Context, info RunInfo) error {
	if h.Out == nil {
		return fmt.Errorf("progress bar: nil Out")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.start, h.last, h.step, h.haveLoss, h.width = info.StartStep, info.LastStep, info.StartStep, false, 0
	h.began = time.Now()
	h.active = true
	return h.drawLocked(false, false)
}

// AfterStep advances the bar.
func (h *ProgressBar) AfterStep(_ context.Context, r StepResult) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.step = r.Step
	due := time.Since(h.drawn) >= progressRedraw || r.Step == h.last
	if h.Every > 0 && r.Step%h.Every == 0 {
		h.loss, h.haveLoss, due = r.Loss, true, true
	}
	if !due {
		return false, nil
	}
	return false, h.drawLocked(false, false)
}

// End draws the bar where the run ended and ends its line.
func (h *ProgressBar) End(_ context.Context, _ RunInfo, cause error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.active {
		return nil
	}
	err := h.drawLocked(true, cause != nil)
	h.active = false
	return err
}

// drawLocked writes the bar over the previous drawing; the last drawing
// of a run ends the line. h.mu is held.
func (h *ProgressBar) drawLocked(last, stopped bool) error {
	line := h.fit(last, stopped)
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

// blank clears the drawn line and returns to its start. h.mu is held.
func (h *ProgressBar) blank() {
	fmt.Fprintf(h.Out, "\r%s\r", strings.Repeat(" ", h.width))
	h.width = 0
}

// fit is the widest line that fits maxWidth: fields dropped from the
// least needed, then the bar narrowed, then cut.
func (h *ProgressBar) fit(last, stopped bool) string {
	max := h.maxWidth()
	var line string
	for _, f := range []progressFields{
		{loss: true, left: true, speed: true, bar: progressWidth},
		{left: true, speed: true, bar: progressWidth},
		{speed: true, bar: progressWidth},
		{bar: progressWidth},
		{bar: 10},
		{},
	} {
		f.loss, f.left = f.loss && h.haveLoss, f.left && !last && !stopped
		if line = h.line(f, stopped); len(line) <= max {
			return line
		}
	}
	return line[:max]
}

// progressFields are the parts of a line to draw; bar is the bar's width
// (0: none).
type progressFields struct {
	loss, left, speed bool
	bar               int
}

// line is the bar as it stands, with the fields f; a stopped run's says
// so.
func (h *ProgressBar) line(f progressFields, stopped bool) string {
	var b strings.Builder
	switch {
	case h.last > 0 && f.bar > 0:
		done := min(max(h.step, 0), h.last)
		filled := int(done * int64(f.bar) / h.last)
		fmt.Fprintf(&b, "train %3d%% [%s%s] %d/%d", done*100/h.last,
			strings.Repeat("=", filled), strings.Repeat(" ", f.bar-filled), h.step, h.last)
	case h.last > 0:
		fmt.Fprintf(&b, "train %d/%d", h.step, h.last)
	default:
		fmt.Fprintf(&b, "train step %d", h.step)
	}
	if done, secs := h.step-h.start, time.Since(h.began).Seconds(); done > 0 && secs > 0 && (f.speed || f.left) {
		perSec := float64(done) / secs
		if f.speed {
			fmt.Fprintf(&b, ", %v steps/s", rate(perSec))
		}
		if f.left && h.last > h.step {
			left := time.Duration(float64(h.last-h.step) / perSec * float64(time.Second))
			fmt.Fprintf(&b, ", %v left", left.Round(time.Second))
		}
	}
	if f.loss {
		fmt.Fprintf(&b, ", loss %v", roundMetric(h.loss))
	}
	if stopped {
		b.WriteString(", stopped")
	}
	return b.String()
}
