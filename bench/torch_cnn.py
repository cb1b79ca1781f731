"""PyTorch twin of cmd/towerbench -model cnn: batch 128, NCHW 3x32x32,
conv 3x3x16 (same padding, no bias) + ReLU + max-pool 2 -> conv 3x3x32 + ReLU
+ max-pool 2 -> dense 10, float32, mean squared error against random
targets, SGD.

    /usr/bin/python3 bench/torch_cnn.py --threads 1
    /usr/bin/python3 bench/torch_cnn.py --threads 2
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ in bench/
import torchbench  # noqa: E402  (before torch: it sets OpenBLAS's threads)
import torch  # noqa: E402


def main():
    args = torchbench.parse_args("cnn", 128)
    torch.manual_seed(args.seed)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1, bias=False),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1, bias=False),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(32 * 8 * 8, 10),
    )
    torchbench.run("cnn", net, (3, 32, 32), 10, args)


if __name__ == "__main__":
    main()
