"""Gradient derivation, MindSpore style and PyTorch style, in fluidlite.

MindSpore's functional ``grad`` / ``value_and_grad`` (``grad_position``, ``weights``,
``has_aux``) are ``fluidlite.autograd.grad`` / ``value_and_grad``; PyTorch's ``backward`` is the
dygraph ``backward``. The numbers printed are those of MindSpore's gradient-derivation tutorial.
Gradients are in fluid's layouts: the ``Linear`` weight is ``[in, out]``, so MindSpore's
``[[2, 4, 6]]`` prints as a column. The last part runs the same gradient compiled
(``jit=True``): traced once into a static Program whose backward ops ``fluid.gradients``
appended, printed here.

    python samples/functional_grad.py
"""
import numpy as np

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.autograd import grad, value_and_grad
from fluidlite.clip import clip_by_global_norm
from fluidlite.core.ir import OpRole


def show(x):
    """Tensors (nested in tuples) as their values: ``[[4. 6. 8.]]``, ``(-2.0, ...)``."""
    if isinstance(x, tuple):
        return "(" + ", ".join(show(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    return str(np.asarray(x.numpy() if hasattr(x, "numpy") else x)).replace("\n", "")


def scalar(value):
    return dygraph.to_variable(np.array(value, "float32"))


class Net(dygraph.Layer):
    """A bias-free Linear(3, 1) and the mean squared error against y: (loss, logits)."""

    def __init__(self, in_channel, out_channel):
        super().__init__()
        self.fc = dygraph.Linear(in_channel, out_channel, bias_attr=False)

    def forward(self, x, y):
        logits = fluid.layers.squeeze(self.fc(x), axes=[])
        loss = fluid.layers.reduce_mean(fluid.layers.square(logits - y))
        return loss, logits


def main():
    with dygraph.guard():
        print("=== tensor.backward ===")                  # PyTorch's way: fluid's dygraph
        x, y = scalar(1.0), scalar(2.0)
        x.stop_gradient = y.stop_gradient = False
        print("x.grad before backward", x.gradient())
        z = x ** 2 + y
        z.backward()
        print("z", float(z))
        print("x.grad", float(x.gradient()))
        print("y.grad", float(y.gradient()))

        print("=== fluidlite.autograd.grad ===")           # MindSpore's way
        x, y = scalar(1.0), scalar(2.0)

        def net(x, y):
            return x ** 2 + y
        print("out", show(grad(net, grad_position=0)(x, y)))
        print("out1", show(grad(net, grad_position=1)(x, y)))

        print("=== fluidlite.autograd.grad, several outputs ===")

        def net2(x, y):
            return x ** 2 + y, x
        print("out", show(grad(net2, grad_position=0)(x, y)))   # d(x^2 + y + x)/dx
        print("out1", show(grad(net2, grad_position=1)(x, y)))

        print("=== fluidlite.autograd.grad has_aux ===")
        out, _ = grad(net2, grad_position=0, has_aux=True)(x, y)
        print("out", show(out))
        out, _ = grad(net2, grad_position=1, has_aux=True)(x, y)
        print("out", show(out))

        net = Net(3, 1)
        net.fc.weight.set_value(np.array([[2], [3], [4]], "float32"))
        print("=== weight ===")
        for param in net.parameters():
            print("name:", param.name, "data:", show(param))
        x = dygraph.to_variable(np.array([[1, 2, 3]], "float32"))
        y = scalar(19)
        loss, logits = net(x, y)
        print("=== output ===")
        print(float(loss), float(logits))

        cases = [(0, None), (1, None), ((0, 1), None), (None, net.parameters()),
                 (0, net.parameters()), ((0, 1), net.parameters())]
        for i, (position, weights) in enumerate(cases, 1):
            print(f"=== grads {i} ===")
            g, logit = grad(net, grad_position=position, weights=weights, has_aux=True)(x, y)
            print("grad", show(g))
            print("logit", show(logit))

        print("=== grads 7 ===")                            # has_aux=False: loss + logits
        print("grad", show(grad(net, grad_position=0, weights=None, has_aux=False)(x, y)))

        print("=== grads 8 ===")
        try:
            grad(net, grad_position=None, weights=None, has_aux=True)
        except ValueError as e:
            print("ValueError:", e)

        print("=== value and grad ===")
        f = value_and_grad(net, grad_position=(0, 1), weights=net.parameters(), has_aux=True)
        value, g = f(x, y)
        print("value", show(value))
        print("grad", show(g))

        print("=== clip_by_global_norm ===")
        wgrad = grad(net, grad_position=None, weights=net.parameters(), has_aux=True)(x, y)[0]
        print("grad", show(clip_by_global_norm(wgrad)))

        print("=== compiled (jit=True): same numbers, from a static program ===")
        f = value_and_grad(net, grad_position=(0, 1), weights=net.parameters(), has_aux=True,
                           jit=True)
        value, g = f(x, y)
        print("value", show(value))
        print("grad", show(g))
        ops = f.last_program.global_block().ops
        forward = [op.type for op in ops if not op.attr("op_role") & OpRole.Backward]
        backward = [op.type for op in ops if op.attr("op_role") & OpRole.Backward]
        print("forward ops ", " ".join(forward))
        print("backward ops", " ".join(backward))
        print("(print(f.program(x, y)) shows the whole program)")


if __name__ == "__main__":
    main()
