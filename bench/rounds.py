#!/usr/bin/env python3
"""Interleaved rounds of benchmark commands, summarized as medians.

On a shared, noisy machine two commands are compared fairly only side by
side: each round runs every command once, in order, and the figures are
the medians over rounds, with per-round ratios (docs/performance.md,
"Method"). Every command prints lines like towerbench's and the PyTorch
scripts':

    model=resnet20 impl=towerflow towers=2 samples_per_sec=1012.4 ...

Each such line is a figure named NAME/T, for the command NAME and T
towers (or threads). Example, ResNet-20 bfloat16 against PyTorch:

    python3 bench/rounds.py -n 10 \\
      --run 'bf16=env -u OPENBLAS_CORETYPE /tmp/tbd -model resnet20 -impl towerflow -towers 1,2 -steps 8 -warmup 2 -precision bf16' \\
      --run 'torch1=python3 bench/torch_resnet.py --threads 1 --steps 8 --warmup 2' \\
      --run 'torch2=python3 bench/torch_resnet.py --threads 2 --steps 8 --warmup 2' \\
      --ratio 'bf16/2:torch1/1,torch2/2' --ratio 'bf16/2:bf16/1'

A ratio NUM:DEN[,DEN...] is NUM over the best of the DENs in each round.
Commands run through the shell with ROUND set to the round (1, 2, ...).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

FIGURE = re.compile(r"\btowers=(\d+)\s+samples_per_sec=([0-9.]+)")


def parse_run(spec):
    name, sep, command = spec.partition("=")
    if not sep or not name or not command:
        raise argparse.ArgumentTypeError(f"--run {spec!r}: want NAME=COMMAND")
    return name, command


def parse_ratio(spec):
    num, sep, dens = spec.partition(":")
    if not sep or not num or not dens:
        raise argparse.ArgumentTypeError(f"--ratio {spec!r}: want NUM:DEN[,DEN...]")
    return num, dens.split(",")


def figures(output):
    """Returns {towers: samples/s} from a command's output."""
    return {int(t): float(v) for t, v in FIGURE.findall(output)}


def span(values, fmt):
    return f"median {fmt % statistics.median(values)} ({fmt % min(values)}–{fmt % max(values)})"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--rounds", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--run", type=parse_run, action="append", required=True, metavar="NAME=COMMAND")
    ap.add_argument("--ratio", type=parse_ratio, action="append", default=[], metavar="NUM:DEN[,DEN...]")
    ap.add_argument("--log", help="append every command's output here")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"-n {args.rounds}: want at least 1 round")
    names = [name for name, _ in args.run]
    if len(set(names)) != len(names):
        ap.error(f"--run names {names}: each once")

    rounds = []  # per round: {figure: samples/s}
    log = open(args.log, "a") if args.log else None
    for r in range(1, args.rounds + 1):
        got = {}
        for name, command in args.run:
            env = dict(os.environ, ROUND=str(r))
            p = subprocess.run(command, shell=True, env=env, capture_output=True, text=True)
            if log:
                log.write(f"# round {r} {time.strftime('%H:%M:%S')} {name}: {command}\n{p.stdout}{p.stderr}")
            if p.returncode != 0:
                print(f"round {r}: {name} exited with {p.returncode}: {p.stderr.strip()[-500:]}", file=sys.stderr)
                return 1
            found = figures(p.stdout)
            if not found:
                print(f"round {r}: {name} printed no towers=N samples_per_sec=X line", file=sys.stderr)
                return 1
            for t, v in found.items():
                got[f"{name}/{t}"] = v
        rounds.append(got)
    if log:
        log.close()

    keys = sorted({k for got in rounds for k in got}, key=lambda k: (names.index(k.split("/")[0]), int(k.split("/")[1])))
    width = max(len(k) for k in keys)
    print(f"samples/s over {args.rounds} interleaved rounds")
    for k in keys:
        values = [got[k] for got in rounds if k in got]
        print(f"{k:<{width}}  {span(values, '%.1f')}  n={len(values)}")
    for num, dens in args.ratio:
        for k in [num] + dens:
            if k not in keys:
                print(f"--ratio {num}:{','.join(dens)}: no figure {k} (have {', '.join(keys)})", file=sys.stderr)
                return 1
        per = [got[num] / max(got[d] for d in dens) for got in rounds]
        over = dens[0] if len(dens) == 1 else "best of " + ", ".join(dens)
        print(f"{num} over {over}: {span(per, '%.3f')}; per round {' '.join('%.3f' % x for x in per)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
