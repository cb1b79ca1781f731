"""PyTorch twin of the census wide & deep model (examples/census, TensorFlow's
census tutorial), float32, for the speed check against towerflow:

    wide: a linear model over the categorical columns — workclass (9 + 1
      out-of-vocabulary), education (16 + 1), marital_status (7 + 1),
      relationship (6 + 1), occupation hashed into 1000, age in 11 buckets,
      and the crosses education x occupation and age_buckets x education x
      occupation, each hashed into 1000 — one weight per id
      (nn.EmbeddingBag of width 1, mode "sum", sparse gradients) plus a bias;
    deep: age, education_num, capital_gain, capital_loss, hours_per_week,
      the one-hot workclass, education, marital_status and relationship, and
      occupation embedded in 8 (nn.EmbeddingBag, mode "mean") -> 100 ReLU
      -> 75 ReLU -> 50 ReLU -> 25 ReLU -> 1;
    the logit is their sum; sigmoid cross-entropy; Adagrad for both parts
    (towerflow's wide part trains with FTRL, which PyTorch lacks).

The data are already ids and numbers (no CSV parsing, no vocabulary
look-ups, no hashing): PyTorch's best case, while towerflow's figure
includes its input pipeline's transformation of raw rows.

    /usr/bin/python3 bench/torch_widedeep.py --threads 2
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ in bench/
import torchbench  # noqa: E402  (before torch: it sets OpenBLAS's threads)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import time  # noqa: E402

# The wide part's categorical columns and their ids.
WIDE = {"workclass": 10, "education": 17, "marital_status": 8, "relationship": 7,
        "occupation": 1000, "age_buckets": 11, "education_X_occupation": 1000,
        "age_buckets_X_education_X_occupation": 1000}
ONE_HOT = ("workclass", "education", "marital_status", "relationship")
NUMERIC = 5
EMBED = 8
HIDDEN = (100, 75, 50, 25)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wide = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(n, 1, mode="sum", sparse=True) for n in WIDE.values())
        self.wide_bias = torch.nn.Parameter(torch.zeros(1))
        self.occupation = torch.nn.EmbeddingBag(WIDE["occupation"], EMBED, mode="mean", sparse=True)
        layers, width = [], NUMERIC + sum(WIDE[c] for c in ONE_HOT) + EMBED
        for units in HIDDEN:
            layers += [torch.nn.Linear(width, units), torch.nn.ReLU()]
            width = units
        layers.append(torch.nn.Linear(width, 1))
        self.deep = torch.nn.Sequential(*layers)

    def forward(self, x, ids, offsets):
        wide = self.wide_bias + sum(t(i, offsets) for t, i in zip(self.wide, ids))
        names = list(WIDE)
        one_hot = [torch.nn.functional.one_hot(ids[names.index(c)], WIDE[c]).float() for c in ONE_HOT]
        deep_in = torch.cat([x] + one_hot + [self.occupation(ids[names.index("occupation")], offsets)], dim=1)
        return wide + self.deep(deep_in)


def batches(args):
    """torchbench.DATA_BATCHES batches of (numbers, ids per column,
    offsets, labels): one id per column and row."""
    rng = np.random.default_rng(args.seed)
    out = []
    offsets = torch.arange(args.batch)
    for _ in range(torchbench.DATA_BATCHES):
        x = rng.standard_normal((args.batch, NUMERIC)).astype(np.float32)
        ids = [torch.from_numpy(rng.integers(0, n, args.batch)) for n in WIDE.values()]
        y = (x[:, 0] + (ids[1].numpy() % 2) > 0.5).astype(np.float32)
        out.append((torch.from_numpy(x), ids, offsets, torch.from_numpy(y).unsqueeze(1)))
    return out


def main():
    args = torchbench.parse_args("widedeep", 256)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    net = Net()
    data = batches(args)
    dense = [p for n, p in net.named_parameters() if not (n.startswith("wide.") or n.startswith("occupation."))]
    sparse = [p for n, p in net.named_parameters() if n.startswith("wide.") or n.startswith("occupation.")]
    opts = [torch.optim.Adagrad(dense, lr=0.05), torch.optim.Adagrad(sparse, lr=0.05)]
    loss_fn = torch.nn.BCEWithLogitsLoss()
    net.train()
    stamps = [time.perf_counter()]
    for i in range(args.warmup + args.steps):
        x, ids, offsets, y = data[i % len(data)]
        for o in opts:
            o.zero_grad(set_to_none=True)
        loss = loss_fn(net(x, ids, offsets), y)
        loss.backward()
        for o in opts:
            o.step()
        stamps.append(time.perf_counter())
    torchbench.report("widedeep", args, stamps)


if __name__ == "__main__":
    main()
