"""PyTorch twin of cmd/towerbench -model resnet20: ResNet-20 for CIFAR-10
(He et al. 2016, section 4.2), batch 128, NCHW 3x32x32, float32:

    conv 3x3x16 (padding 1, no bias) + batch norm + ReLU
    3 stages of 3 basic blocks, 16/32/64 filters; a block is
      conv 3x3 + BN + ReLU, conv 3x3 + BN, + shortcut, ReLU;
      the first block of stages 2 and 3 has stride 2 and a projection
      shortcut (1x1 conv stride 2 + BN, option B)
    global average pooling, dense 10

softmax cross-entropy against random class ids, SGD with momentum 0.9.
Batch norm uses epsilon 1e-3, as towerflow's layers.BatchNorm by default.

    /usr/bin/python3 bench/torch_resnet.py --threads 1
    /usr/bin/python3 bench/torch_resnet.py --threads 2
    /usr/bin/python3 bench/torch_resnet.py --threads 2 --channels-last

--channels-last computes in PyTorch's channels-last memory format (NHWC),
as towerbench's resnet20 does with -format nhwc.
"""

import sys

sys.dont_write_bytecode = True  # no __pycache__ in bench/
import torchbench  # noqa: E402  (before torch: it sets OpenBLAS's threads)
import torch  # noqa: E402

EPSILON = 1e-3


def conv_bn(cin, cout, kernel, stride):
    return [
        torch.nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False),
        torch.nn.BatchNorm2d(cout, eps=EPSILON),
    ]


class Block(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = torch.nn.Sequential(
            *conv_bn(cin, cout, 3, stride), torch.nn.ReLU(), *conv_bn(cout, cout, 3, 1))
        self.shortcut = torch.nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = torch.nn.Sequential(*conv_bn(cin, cout, 1, stride))

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


def resnet(depth, classes=10):
    n = (depth - 2) // 6
    layers = [*conv_bn(3, 16, 3, 1), torch.nn.ReLU()]
    cin = 16
    for stage, width in enumerate((16, 32, 64)):
        for i in range(n):
            stride = 2 if stage > 0 and i == 0 else 1
            layers.append(Block(cin, width, stride))
            cin = width
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, classes)]
    return torch.nn.Sequential(*layers)


def main():
    def extra(p):
        p.add_argument("--channels-last", action="store_true",
                       help="compute in the channels-last memory format (NHWC)")

    args = torchbench.parse_args("resnet20", 128, extra)
    torch.manual_seed(args.seed)
    torchbench.run("resnet20", resnet(20), (3, 32, 32), 10, args, classify=True,
                   channels_last=args.channels_last)


if __name__ == "__main__":
    main()
