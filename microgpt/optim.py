"""
Adam, the optimizer microgpt trains with, over a flat list of parameters.

Each parameter keeps two running averages of its gradient: m (the mean, "which way to go")
and v (the mean square, the gradient's scale). The step is lr * m / sqrt(v): dividing by the
scale makes a weight move by about lr per step whatever the size of its gradient, so one
learning rate suits every weight, whether its gradients are tiny or huge. Both averages
start at 0, so early on they are biased towards 0; dividing by (1 - beta^t) removes that bias.
(On the first step the corrected m / sqrt(v) is g / |g| = +-1: every weight with a gradient
moves by almost exactly lr.) train.py makes one `Adam` and calls `step(lr)` once per step with the
decayed learning rate; the state (m, v, t) is saved in checkpoints so --resume continues exactly.

Weight decay (train.py --weight-decay, 0 by default: microgpt's Adam exactly) is decoupled, as
AdamW does it: each step first shrinks every weight by the fraction lr * weight_decay, then takes
Adam's step. Adding weight_decay * w to the gradient instead (L2 regularization) would not do the
same under Adam: that term would be divided by sqrt(v) with the rest, so a weight whose gradients
are large would hardly feel it and one whose gradients are tiny would be pulled to 0 hard; shrunk
apart from the moments, every weight decays at the same rate. microgpt has no biases or norm
gains, so it applies to every matrix, the embeddings included.
"""

from math import sqrt


class Adam:
    def __init__(self, params, beta1=0.85, beta2=0.99, eps=1e-8, weight_decay=0.0):
        self.params = params            # flat list of Value, as GPT.params
        self.beta1 = beta1              # decay of the gradient mean m (0.85: short memory)
        self.beta2 = beta2              # decay of the squared-gradient mean v
        self.eps = eps                  # keeps the division finite where v is ~0
        self.weight_decay = weight_decay  # the fraction of itself each weight loses per unit of lr
        self.m = [0.0] * len(params)    # first moment per parameter
        self.v = [0.0] * len(params)    # second moment per parameter
        self.t = 0                      # steps taken so far

    def step(self, lr):
        """One update with learning rate `lr` (train.py passes the decayed rate; 1e-3..1e-2 suits
        this tiny model)."""
        self.t += 1
        b1, b2, eps = self.beta1, self.beta2, self.eps
        bias1 = 1 - b1 ** self.t        # bias corrections for the zero start of m and v
        bias2 = 1 - b2 ** self.t
        m, v = self.m, self.v
        for i, p in enumerate(self.params):
            g = p.grad
            m_i = m[i] = b1 * m[i] + (1 - b1) * g       # running mean of the gradient
            v_i = v[i] = b2 * v[i] + (1 - b2) * g * g   # running mean of its square
            m_hat = m_i / bias1
            v_hat = v_i / bias2
            if self.weight_decay:  # decoupled: the weight shrinks, the moments never see it
                p.data *= 1 - lr * self.weight_decay
            p.data -= lr * m_hat / (sqrt(v_hat) + eps)
            # note: the grad is used up. backward() adds to every grad and resets none, so a
            # weight keeps this one until it is zeroed: the next step's backward would add to
            # it, and a weight the next name does not touch (another letter's row of wte)
            # would be moved again by a gradient it no longer has
            p.grad = 0.0

    def state(self):
        """What a checkpoint needs to resume: the moments and the step count."""
        return {'t': self.t, 'm': list(self.m), 'v': list(self.v)}

    def load_state(self, state):
        """state: one of state()'s, whose sizes the checkpoint reader has checked."""
        self.t, self.m, self.v = state['t'], list(state['m']), list(state['v'])
