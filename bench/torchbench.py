"""Shared timing loop of bench/torch_mlp.py, bench/torch_cnn.py,
bench/torch_resnet.py and bench/torch_embed.py.

Prints the line cmd/towerbench prints, with impl=pytorch and
towers=<threads>:

    model=<m> impl=pytorch towers=<threads> samples_per_sec=<x> step_ms_p50=<y>

Run with Debian's python3 (apt-get install python3-torch):

    /usr/bin/python3 bench/torch_mlp.py --threads 1

--threads N is torch.set_num_threads(N), for PyTorch's own kernels;
--blas-threads M (default N) is OPENBLAS_NUM_THREADS=M, for the BLAS its
matrix products go to. Debian's PyTorch is built against the generic BLAS
interface (BLAS_INFO=generic) and runs on OpenBLAS through
update-alternatives, so set_num_threads alone leaves OpenBLAS a thread per
core on top of it. Import this module before torch: the variable must be set
before OpenBLAS loads. An OPENBLAS_NUM_THREADS already in the environment
wins over both.

--device cuda runs on the GPU (timing waits for it after each step);
--bf16 computes in bfloat16 autocast (torch.autocast) on either device.
"""

import argparse
import os
import statistics
import sys
import time


def _blas_threads_from_argv():
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--blas-threads", type=int, default=0)
    known, _ = p.parse_known_args(sys.argv[1:])
    return known.blas_threads or known.threads


os.environ.setdefault("OPENBLAS_NUM_THREADS", str(_blas_threads_from_argv()))

import torch  # noqa: E402


def parse_args(model, default_batch, extra=None):
    """Parses the common flags; extra, if given, adds a model's own to the
    parser first."""
    p = argparse.ArgumentParser(description=f"PyTorch {model} training benchmark")
    if extra is not None:
        extra(p)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--blas-threads", type=int, default=0, help="OpenBLAS threads (default: --threads)")
    p.add_argument("--steps", type=int, default=50, help="timed training steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before the timed ones")
    p.add_argument("--batch", type=int, default=default_batch, help="batch size")
    p.add_argument("--seed", type=int, default=1, help="seed of the data and the model")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast (torch.autocast)")
    return p.parse_args()


# SGD learning rate, as in cmd/towerbench.
LEARNING_RATE = 0.01
# Distinct batches in the synthetic data set; training cycles over them.
DATA_BATCHES = 4


# Momentum of the classifier benchmarks (resnet20), as in cmd/towerbench.
MOMENTUM = 0.9


def run(model_name, net, example_shape, outputs, args, classify=False, channels_last=False):
    """Times training steps of net on random batches. With classify, the
    targets are random class ids, the loss softmax cross-entropy and the
    optimizer SGD with momentum; otherwise random targets, mean squared
    error and plain SGD. With channels_last, the network and the images
    are in PyTorch's channels-last memory format (NHWC)."""
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    xs = [torch.randn((args.batch, *example_shape), generator=gen) for _ in range(DATA_BATCHES)]
    if classify:
        ys = [torch.randint(0, outputs, (args.batch,), generator=gen) for _ in range(DATA_BATCHES)]
    else:
        ys = [torch.randn((args.batch, outputs), generator=gen) for _ in range(DATA_BATCHES)]
    net = net.to(args.device)
    xs = [x.to(args.device) for x in xs]
    ys = [y.to(args.device) for y in ys]
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
        xs = [x.contiguous(memory_format=torch.channels_last) for x in xs]
    if classify:
        opt = torch.optim.SGD(net.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
        loss_fn = torch.nn.CrossEntropyLoss()
    else:
        opt = torch.optim.SGD(net.parameters(), lr=LEARNING_RATE)
        loss_fn = torch.nn.MSELoss()
    cuda = args.device.startswith("cuda")

    def now():
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    net.train()
    stamps = [now()]
    for i in range(args.warmup + args.steps):
        x, y = xs[i % DATA_BATCHES], ys[i % DATA_BATCHES]
        opt.zero_grad(set_to_none=True)
        with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=args.bf16):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        stamps.append(now())
    report(model_name, args, stamps)


def report(model_name, args, stamps):
    """Prints cmd/towerbench's line for the time stamps taken before the
    first step and after each of the args.warmup + args.steps steps."""
    timed = stamps[args.warmup:]
    steps = [b - a for a, b in zip(timed, timed[1:])]
    total = timed[-1] - timed[0]
    print(f"# torch threads {torch.get_num_threads()}, "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, "
          f"device {args.device}, bf16 autocast {args.bf16}", file=sys.stderr)
    print(f"model={model_name} impl=pytorch towers={args.threads} "
          f"samples_per_sec={args.batch * args.steps / total:.1f} "
          f"step_ms_p50={statistics.median(steps) * 1000:.3f}", flush=True)
