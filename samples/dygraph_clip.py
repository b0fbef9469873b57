"""The fluid 1.8 ``GradientClipByValue`` dygraph example, trained for a few steps.

``Linear(10, 10)`` on uniform inputs, loss ``reduce_mean(out)`` (the seed's example, verbatim up
to the training loop), SGD (lr 0.1) with ``GradientClipByValue(min=-1, max=1)``. The inputs are
scaled by 50 here so that some gradients exceed the clip range. Per step it prints the loss,
the largest gradient before clipping, the largest clipped gradient (what the clip object returns
for the same ``(param, grad)`` pairs) and checks that SGD moved each weight by exactly
``-0.1 * clip(grad, -1, 1)``.

Run: python samples/dygraph_clip.py
"""
import numpy as np

import fluidlite as fluid

with fluid.dygraph.guard():
    fluid.default_main_program().random_seed = 1          # same numbers on every run
    linear = fluid.dygraph.Linear(10, 10)     # trainable parameters: linear_0.w_0, linear_0.b_0
    clip = fluid.clip.GradientClipByValue(min=-1, max=1)
    sgd_optimizer = fluid.optimizer.SGD(
        learning_rate=0.1, parameter_list=linear.parameters(), grad_clip=clip)
    print("parameters:", [p.name for p in linear.parameters()])
    for step in range(5):
        inputs = fluid.layers.uniform_random([32, 10]).astype('float32') * 50
        out = linear(fluid.dygraph.to_variable(inputs))
        loss = fluid.layers.reduce_mean(out * out)
        loss.backward()
        before = {p.name: p.numpy().copy() for p in linear.parameters()}
        grads = [(p, p.grad) for p in linear.parameters()]
        clipped = clip(grads)                    # the same object the optimizer applies
        gmax = max(float(np.abs(g.numpy()).max()) for _, g in grads)
        cmax = max(float(np.abs(g.numpy()).max()) for _, g in clipped)
        sgd_optimizer.minimize(loss)
        for p, g in grads:
            expected = before[p.name] - np.float32(0.1) * np.clip(g.numpy(), -1, 1)
            assert np.array_equal(p.numpy(), expected), p.name
        linear.clear_gradients()
        print(f"step {step}: loss {float(loss):10.4f}   max |grad| before clip {gmax:9.4f}"
              f"   after clip {cmax:.4f}")
    print("every update was exactly -0.1 * clip(grad, -1, 1)")
