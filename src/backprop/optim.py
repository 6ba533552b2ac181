"""
Adam on arrays: microgpt/optim.py's update, for every parameter at once.

Read microgpt/optim.py first: this is the same update (beta1 0.85, beta2 0.99, eps 1e-8, bias
correction, the learning rate given per step), written with the same operations in the same
order, so each parameter's new value is the same float the scalar loop computes. The scalar
Adam walks GPT.params, a flat list of every weight in parameter_shapes order, each matrix row
by row; here all weights live in ONE flat array (float64; float32 for speed) in that order, so m and v are
stored exactly as a checkpoint stores the scalar optimizer's, and a checkpoint is the same
file whichever engine wrote it. (Trainer in trainer.py keeps its weight matrices as views into
that flat array: updating it updates them.)
"""

import numpy as np

CHUNK = 65536  # numbers updated at a time (see update): 256 KiB of each array in float32, measured best


class AdamArrays:
    def __init__(self, n_params, beta1=0.85, beta2=0.99, eps=1e-8, dtype=np.float64, weight_decay=0.0):
        self.beta1 = beta1              # decay of the gradient mean m, as microgpt.optim.Adam
        self.beta2 = beta2              # decay of the squared-gradient mean v
        self.eps = eps                  # keeps the division finite where v is ~0
        self.weight_decay = weight_decay  # decoupled, as microgpt.optim.Adam's (its docstring says why)
        self.dtype = dtype              # the weights' dtype: float64 (exact) or float32 (fast)
        self.m = np.zeros(n_params, dtype=dtype)  # (n_params,): first moment, in GPT.params order
        self.v = np.zeros(n_params, dtype=dtype)  # (n_params,): second moment
        self.t = 0                      # steps taken so far

    def step(self, params, grads, lr, split=None):
        """One update of the flat array `params` (in place) with its gradient `grads`.

        split: a parallel.Split, to update one slice of the weights on each of its cores at
        once (each number's update depends on its own m, v and gradient alone, so the slices
        give the same floats as one pass); None: all of them here.
        """
        self.t += 1
        if split is None:
            self.update(params, grads, lr, slice(None))
        else:
            split.each_slice(lambda part: self.update(params, grads, lr, part))

    def update(self, params, grads, lr, part):
        """Step self.t's update of params[part], from grads[part] and m, v's part.

        A chunk of CHUNK numbers at a time: the update is a dozen passes over its arrays, and a
        chunk's temporaries (two arrays of CHUNK numbers, 512 KiB in float32) stay in the core's
        cache from one pass to the next, where whole parameter-sized temporaries would go out to
        memory and back each pass (about a tenth quicker in float32, a fifth in float64).
        """
        b1, b2, eps = self.beta1, self.beta2, self.eps
        bias1 = 1 - b1 ** self.t        # Python floats, as in the scalar Adam
        bias2 = 1 - b2 ** self.t
        start, stop, _ = part.indices(len(params))
        scratch = np.empty((2, min(CHUNK, stop - start)), dtype=self.dtype)  # (2, CHUNK): this call's own
        for i in range(start, stop, CHUNK):
            j = min(i + CHUNK, stop)
            p, g, m, v = params[i:j], grads[i:j], self.m[i:j], self.v[i:j]
            tmp, update = scratch[:, :j - i]
            # the scalar line's operations, in its order, so every float comes out the same:
            # m = b1 * m + (1 - b1) * g;  v = b2 * v + ((1 - b2) * g) * g;  p -= (lr * m_hat) / (...)
            # each written into m, v or the scratch: the scalars are Python floats, which numpy
            # applies in the arrays' own dtype (a float32 run stays float32 throughout)
            m *= b1
            np.multiply(g, 1 - b1, out=tmp)
            m += tmp
            v *= b2
            np.multiply(g, 1 - b2, out=tmp)
            tmp *= g
            v += tmp
            np.divide(v, bias2, out=tmp)                # v_hat
            np.sqrt(tmp, out=tmp)
            tmp += eps                                  # sqrt(v_hat) + eps
            np.divide(m, bias1, out=update)             # m_hat
            update *= lr
            update /= tmp
            if self.weight_decay:                       # p *= 1 - lr * wd, then Adam's step: the scalar order
                p *= 1 - lr * self.weight_decay
            p -= update

    def state(self):
        """{'t', 'm', 'v'} with plain Python floats: microgpt.optim.Adam.state()'s form."""
        return {'t': self.t, 'm': self.m.tolist(), 'v': self.v.tolist()}

    def load_state(self, state):  # the checkpoint's reader has checked its sizes
        self.t = int(state['t'])
        self.m = np.array(state['m'], dtype=self.dtype)  # (n_params,): float32 rounds a float64 run's
        self.v = np.array(state['v'], dtype=self.dtype)  # (n_params,)
