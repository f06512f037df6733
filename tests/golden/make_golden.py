#!/usr/bin/python3
"""Writes tests/golden/tiny_nets.txt: loss and every gradient of three tiny networks, computed with
PyTorch in float64 (so the values are exact to the digits written). Inputs and parameters come from
closed-form formulas that tests/test_nn.c repeats, so no tensors need to be stored.

Produced once with Debian bookworm's python3-torch 1.13.1:  /usr/bin/python3 tests/golden/make_golden.py
"""
import math
import os
import torch

torch.set_default_dtype(torch.float64)
F = torch.nn.functional


def fill(shape, f):
    n = math.prod(shape)
    return torch.tensor([f(i) for i in range(n)]).reshape(shape).requires_grad_(True)


out = []


def emit(name, t):
    vals = t.detach().reshape(-1).tolist()
    out.append(name + " " + " ".join("%.9g" % v for v in vals))


# mlp: x (4,4) -> linear 4->5 + relu -> linear 5->3 -> cross-entropy
x = fill((4, 4), lambda i: math.sin(1.3 * i)).detach()
w1 = fill((5, 4), lambda i: 0.5 * math.sin(0.7 * i + 0.3))
b1 = fill((5,), lambda i: 0.1 * math.cos(i))
w2 = fill((3, 5), lambda i: 0.5 * math.cos(0.9 * i + 0.1))
b2 = fill((3,), lambda i: 0.05 * (i - 1))
y = torch.tensor([0, 2, 1, 2])
loss = F.cross_entropy(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2), y)
loss.backward()
emit("mlp.loss", loss)
for n, p in [("fc1.weight", w1), ("fc1.bias", b1), ("fc2.weight", w2), ("fc2.bias", b2)]:
    emit("mlp." + n, p.grad)

# cnn: x (2,1,4,4) -> conv 1->2 3x3 pad 1 + relu -> maxpool 2 -> flatten -> linear 8->3 -> cross-entropy
x = fill((2, 1, 4, 4), lambda i: math.sin(0.37 * i * i + 0.2)).detach()
cw = fill((2, 1, 3, 3), lambda i: 0.4 * math.cos(1.1 * i))
cb = fill((2,), lambda i: 0.1 * (i + 1))
fw = fill((3, 8), lambda i: 0.3 * math.sin(0.5 * i + 1.0))
fb = fill((3,), lambda i: 0.0)
y = torch.tensor([1, 2])
h = F.max_pool2d(F.relu(F.conv2d(x, cw, cb, padding=1)), 2)
loss = F.cross_entropy(F.linear(h.flatten(1), fw, fb), y)
loss.backward()
emit("cnn.loss", loss)
for n, p in [("conv1.weight", cw), ("conv1.bias", cb), ("fc1.weight", fw), ("fc1.bias", fb)]:
    emit("cnn." + n, p.grad)

# misc: x (3,6) -> layer norm -> linear 6->4 + gelu -> linear 4->3 + tanh -> cross-entropy
x = fill((3, 6), lambda i: math.cos(0.8 * i) * 2.0).detach()
g = fill((6,), lambda i: 1.0 + 0.1 * i)
be = fill((6,), lambda i: 0.05 * i - 0.1)
wa = fill((4, 6), lambda i: 0.4 * math.sin(0.3 * i + 0.5))
ba = fill((4,), lambda i: 0.02 * i)
wb = fill((3, 4), lambda i: 0.6 * math.cos(0.45 * i))
bb = fill((3,), lambda i: -0.03 * i)
y = torch.tensor([2, 0, 1])
h = F.layer_norm(x, (6,), g, be, eps=1e-5)
h = torch.tanh(F.linear(F.gelu(F.linear(h, wa, ba)), wb, bb))
loss = F.cross_entropy(h, y)
loss.backward()
emit("misc.loss", loss)
for n, p in [("ln.weight", g), ("ln.bias", be), ("fa.weight", wa), ("fa.bias", ba), ("fb.weight", wb), ("fb.bias", bb)]:
    emit("misc." + n, p.grad)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_nets.txt")
with open(path, "w") as f:
    f.write("# loss and gradients of three tiny nets, from make_golden.py (PyTorch %s, float64)\n" % torch.__version__)
    f.write("\n".join(out) + "\n")
print("wrote", path)
