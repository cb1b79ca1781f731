package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

const usage = `usage: towerflow <command> [flags] [args]

Commands:
  inspect [-values] [-n count] <checkpoint, model or export version dir>
        print a checkpoint's step, format and variables (the latest
        checkpoint of a model dir; an export's signatures and variables)
  plot [-o out.png] [-metrics loss,accuracy] [-width px] [-height px] [-log auto|on|off] <model dir>
        draw train_history.jsonl and eval_history.jsonl as a PNG
  tabular -train FILES -eval FILES -label COLUMN [-positive VALUE] [-model linear|dnn|wide_deep] [-steps N] [-model_dir DIR] [-export DIR] [-serve ADDR]
        infer feature columns and a head from CSV (with a header) or
        TFRecord files, train a canned model, and print the evaluation's
        metrics as key=value on the last line
  help  print this message

Run "towerflow <command> -h" for a command's flags.
`

// usageError is a bad command line: run prints it with the usage and exits
// with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// commands maps a subcommand to its function, which writes its output to
// stdout, warnings to stderr, and returns its error.
var commands = map[string]func(stdout, stderr io.Writer, args []string) error{
	"inspect": inspect,
	"plot":    plotHistory,
	"tabular": tabularCmd,
}

// run runs the command line args (without the program name) and returns the
// exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// A command line without a command is a usage error, as for go or
		// git: status 2, the usage on stderr.
		fmt.Fprint(stderr, usage)
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "towerflow: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	err := cmd(stdout, stderr, args[1:])
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "towerflow %s: %v\n\n%s", args[0], err, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "towerflow %s: %v\n", args[0], err)
		return 1
	}
}

// parseFlags parses args with fs, allowing flags after the positional
// arguments too ("plot model -o x.png"), and returns the positional ones.
// Everything after "--" is positional. A bad flag is a usage error; -h
// prints the command's synopsis and flags to stdout and gives
// flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, synopsis string, stdout io.Writer, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(stdout, "usage: towerflow %s %s\n\nFlags:\n", fs.Name(), synopsis)
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
