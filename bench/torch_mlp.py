"""PyTorch twin of cmd/towerbench -model mlp: batch 512, 256 -> 512 ReLU -> 10,
float32, mean squared error against random targets, SGD.

    /usr/bin/python3 bench/torch_mlp.py --threads 1
    /usr/bin/python3 bench/torch_mlp.py --threads 2
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ in bench/
import torchbench  # noqa: E402  (before torch: it sets OpenBLAS's threads)
import torch  # noqa: E402


def main():
    args = torchbench.parse_args("mlp", 512)
    torch.manual_seed(args.seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(256, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )
    torchbench.run("mlp", net, (256,), 10, args)


if __name__ == "__main__":
    main()
