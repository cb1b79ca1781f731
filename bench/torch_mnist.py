"""PyTorch twin of cmd/towerbench -model mnist: examples/mnist's MLP,
784 -> 128 ReLU -> 10, batch 50, float32, softmax cross-entropy against
random class ids, SGD with momentum 0.9.

    /usr/bin/python3 bench/torch_mnist.py --threads 1
    /usr/bin/python3 bench/torch_mnist.py --threads 2
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ in bench/
import torchbench  # noqa: E402  (before torch: it sets OpenBLAS's threads)
import torch  # noqa: E402


def main():
    args = torchbench.parse_args("mnist", 50)
    torch.manual_seed(args.seed)
    net = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    torchbench.run("mnist", net, (784,), 10, args, classify=True)


if __name__ == "__main__":
    main()
