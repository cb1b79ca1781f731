"""PyTorch twin of cmd/towerbench -model embed: a click-through-rate model,
batch 2048, float32:

    13 dense features -> 64 ReLU -> 16
    26 categorical features, each a bag of 1 to 3 ids drawn from a power law
      P(id = k) ~ (1 + k)^-1.1 over [0, rows), into its own table of
      rows x 16 (nn.EmbeddingBag, mode "sum", sparse gradients)
    the 16 + 26 * 16 = 432 concatenated -> 256 ReLU -> 128 ReLU -> 1 logit

sigmoid cross-entropy against a click that depends on two dense features and
the first bag's first id; Adagrad at learning rate 0.01 (with TensorFlow's
initial accumulator 0.1 and epsilon 1e-7, as towerflow's optimizers.Adagrad)
or plain SGD (--optimizer sgd). The data are the same distribution as
towerbench's, not the same numbers.

    /usr/bin/python3 bench/torch_embed.py --threads 1
    /usr/bin/python3 bench/torch_embed.py --threads 2 --rows 1000000
"""

import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in bench/
import torchbench  # noqa: E402  (before torch: it sets OpenBLAS's threads)
import numpy as np  # noqa: E402
import torch  # noqa: E402

DENSE = 13
CATEGORICAL = 26
DIM = 16
BOTTOM = 64
TOP = (256, 128)
MAX_BAG = 3
ZIPF_S = 1.1


class Net(torch.nn.Module):
    def __init__(self, rows):
        super().__init__()
        self.bottom = torch.nn.Sequential(
            torch.nn.Linear(DENSE, BOTTOM), torch.nn.ReLU(), torch.nn.Linear(BOTTOM, DIM))
        self.tables = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(rows, DIM, mode="sum", sparse=True) for _ in range(CATEGORICAL))
        top, width = [], DIM * (1 + CATEGORICAL)
        for units in TOP:
            top += [torch.nn.Linear(width, units), torch.nn.ReLU()]
            width = units
        top.append(torch.nn.Linear(width, 1))
        self.top = torch.nn.Sequential(*top)

    def forward(self, x, bags):
        parts = [self.bottom(x)]
        parts += [t(ids, offsets) for t, (ids, offsets) in zip(self.tables, bags)]
        return self.top(torch.cat(parts, dim=1))


def batches(args):
    """DATA_BATCHES batches: dense features, per table (ids, offsets), and
    the clicks."""
    rng = np.random.default_rng(args.seed)
    cdf = np.cumsum((1.0 + np.arange(args.rows)) ** -ZIPF_S)
    cdf /= cdf[-1]
    out = []
    for _ in range(torchbench.DATA_BATCHES):
        x = rng.standard_normal((args.batch, DENSE)).astype(np.float32)
        bags = []
        for _ in range(CATEGORICAL):
            sizes = rng.integers(1, MAX_BAG + 1, args.batch)
            ids = np.minimum(np.searchsorted(cdf, rng.random(sizes.sum())), args.rows - 1)
            offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            bags.append((torch.from_numpy(ids), torch.from_numpy(offsets)))
        first = bags[0][0][bags[0][1]].numpy()
        y = ((x[:, 0] + x[:, 1] > 0) != (first % 2 == 0)).astype(np.float32)
        out.append((torch.from_numpy(x), bags, torch.from_numpy(y).unsqueeze(1)))
    return out


def main():
    def extra(p):
        p.add_argument("--rows", type=int, default=100000, help="rows of each embedding table")
        p.add_argument("--optimizer", choices=("adagrad", "sgd"), default="adagrad")

    args = torchbench.parse_args("embed", 2048, extra)
    if args.device != "cpu" or args.bf16:
        sys.exit("torch_embed.py: runs on the CPU in float32 only (no --device, no --bf16)")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    net = Net(args.rows)
    if args.optimizer == "adagrad":
        opt = torch.optim.Adagrad(net.parameters(), lr=torchbench.LEARNING_RATE,
                                  initial_accumulator_value=0.1, eps=1e-7)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=torchbench.LEARNING_RATE)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    data = batches(args)
    net.train()
    stamps = [time.perf_counter()]
    for i in range(args.warmup + args.steps):
        x, bags, y = data[i % len(data)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x, bags), y)
        loss.backward()
        opt.step()
        stamps.append(time.perf_counter())
    torchbench.report("embed", args, stamps)


if __name__ == "__main__":
    main()
