"""
The hints of each exercise, one level at a time: `python -m microgpt.lab exercises hint N`.
A stub's docstring gives the contract, the shapes and the math; the way there is here. Level 1
points at the idea, each level after it says more, the last one is the recipe in words, short of
the code itself (`solution N`). The level reached is kept in the workspace (workspace.py).
"""

HINTS = {
    1: ("Nudge a by a small h: (a + h) * b = a * b + h * b. By how much did the product move, per "
        "unit of h?",
        "The local derivative toward a is the other input, b; toward b it is a. Return the product and "
        "the pair (d/da, d/db) in that order."),
    2: ("Only x is a node: n is a constant, so there is one local derivative. Try n = 2: (x + h)^2 = "
        "x^2 + 2xh + h^2, so x^2 moves by about 2x per unit of h.",
        "The power rule: d(x^n)/dx = n * x^(n - 1). Return x ** n and a one-element tuple holding it. "
        "Mind the comma: (y,) is a tuple, (y) is just y."),
    3: ("Compare e^(x + h) with e^x: e^(x + h) = e^x * e^h, and e^h is about 1 + h for a small h.",
        "So e^x moves by about e^x per unit of h: d(e^x)/dx = e^x, the forward value itself. Compute "
        "out = math.exp(x) once, and return out with the tuple (out,)."),
    4: ("Nudge x by h: ln(x + h) - ln(x) = ln(1 + h/x), and ln(1 + u) is about u for a small u.",
        "d ln(x)/dx = 1/x: at x = 4 the slope is 0.25. The forward value is math.log(x), the natural "
        "log. Return it and the one-element tuple (1 / x,). A slope of x, or of ln x, is the usual slip."),
    5: ("Two pieces: the forward value is max(0, x); right of 0 it is x itself, left of 0 the constant 0.",
        "So the slope is 1 on the right of 0 and 0 on the left. At exactly x = 0 take 0.0, as microgpt "
        "does: 1.0 only where x > 0 (float(x > 0) is one way to write it)."),
    6: ("A node may be appended only after all of its children are. Walk the graph from root with a "
        "list used as a stack, and a set of the nodes already met (a node used twice is one node).",
        "Push (node, False) for a node whose children are not done yet. When you pop one: the first "
        "time, mark it seen and push it back as (node, True), then push each child not yet seen; when "
        "it comes back as (node, True), everything pushed after it is done, so append it to the order.",
        "Start with the stack [(root, False)] and an empty order; loop while the stack is not empty; "
        "return the order, whose last node is root."),
    7: ("The gradient of root toward itself is 1: start there, then walk the nodes in the order that "
        "visits a node only after every node that uses it (your exercise 6, reversed).",
        "At each node, pass node.grad times each local gradient on to the child it belongs to "
        "(zip the node's _children with its _local_grads).",
        "child.grad must be added to (+=), never assigned: a node used twice gets a share along each "
        "path. Set root.grad = 1.0 first; do not reset any other .grad."),
    8: ("Multiply the Values pairwise with the engine's *, then add the products up with +.",
        "Python's sum() adds with +, starting from 0, and 0 + Value works (Value.__radd__): "
        "sum of a[i] * b[i] over zip(a, b) is one Value, with a graph behind it."),
    9: ("Output o uses row o of w: w is [n_out][n_in], one row per output.",
        "One dot product per row: [your dot(row, x) for each row of w]."),
    10: ("Three steps: shift every logit by the largest one, take exp() of each, divide each by their sum.",
         "The shift is a plain float, max of the logits' .data: z - m is still a Value with z's graph. "
         "Then .exp() on each shifted Value, sum() them once, and divide each exp by that total."),
    11: ("The scale 1/sqrt(mean of squares + eps) is one Value shared by every output; each output is "
         "x_i times it.",
         "Mean of squares: the sum of xi * xi over x, divided by len(x). The scale: (that + eps) ** -0.5, "
         "a power (your exercise 2). Multiply each xi by the scale."),
    12: ("Three stages, as attention by hand computes them: scores (one per visible key), softmax, then a "
         "weighted sum of the values.",
         "score_j is your dot(q, keys[j]) times 1/sqrt(head_dim), head_dim = len(q). The weights are "
         "your softmax of the scores.",
         "Output dimension d is a dot product too: the weights against [values[j][d] for each j]. "
         "Return (out, weights)."),
    13: ("gpt() runs in the order of docs/reading-guide.md section 1, file 6: embed, then per layer "
         "attention and the MLP, each a residual block, then the logits. Start from x = wte[token_id] + "
         "wpe[pos_id], element by element, normalised once.",
         "An attention block: keep x as the residual, rmsnorm, q, k and v from the three linears; append "
         "k and v to this layer's cache before attending; then one attention_head per head on its slice "
         "of head_dim dimensions (of q and of every cached k and v); concatenate the heads, apply "
         "attn_wo, add the residual back.",
         "The MLP block: keep x, rmsnorm, linear by mlp_fc1, .relu() on each Value, linear by mlp_fc2, add "
         "the residual back. After the last layer, the logits are linear(x, lm_head): no final rmsnorm.",
         "The weights' names: sd['wte'], sd['wpe'], sd['lm_head'], and for layer li "
         "sd[f'layer{li}.attn_wq'] (and attn_wk, attn_wv, attn_wo, mlp_fc1, mlp_fc2). Head h takes "
         "dimensions h * head_dim up to (h + 1) * head_dim."),
    14: ("A fresh KV cache per name, then one gpt() call per position, each predicting the next token.",
         "At position i: logits from gpt(tokens[i], i, ...), probabilities from your softmax, and the loss "
         "there is minus the .log() of the probability of tokens[i + 1].",
         "The number of positions is the smaller of block_size and len(tokens) - 1. The mean is the sum of "
         "the losses times (1 / n), a Value."),
    15: ("Each parameter keeps two running means: m of its gradient and v of the gradient squared, "
         "updated in place with beta1 and beta2; then both are corrected for starting at 0.",
         "The bias correction divides m by (1 - beta1 ** t) and v by (1 - beta2 ** t); the step moves the "
         "weight against m_hat by lr, divided by sqrt(v_hat) plus eps.",
         "In order, per parameter: update m[i], then v[i] (with g squared), correct both, change p.data, "
         "and set p.grad back to 0.0: the gradient is used up."),
    16: ("Two cases: temperature 0 (greedy, no division) and the rest (a softmax of the logits divided by "
         "the temperature).",
         "Greedy: the index of the largest logit (the first on a tie) gets 1.0, every other 0.0. Otherwise "
         "subtract the largest logit first, then divide by the temperature, exp(), normalise."),
    17: ("All T queries at once: a (T, T) matrix of scaled scores, the future set to -inf, a softmax "
         "along each row, then the weights times v.",
         "np.triu(np.ones((T, T), dtype=bool), k=1) is True exactly where j > i. Work on a new array of "
         "scores (q @ k.T makes one), so q, k and v stay unchanged.",
         "Before exp(), subtract each row's max with axis=-1 and keepdims=True, so the row broadcasts; "
         "normalise each row by its sum the same way. Return (out, weights)."),
    18: ("A gradient has the shape of what it is the gradient of: dx is (R, n_in) like x, dw is "
         "(n_out, n_in) like w.",
         "Match the shapes: dy (R, n_out) with w (n_out, n_in) gives (R, n_in); dy transposed "
         "(n_out, R) with x (R, n_in) gives (n_out, n_in), summed over the rows for free."),
    19: ("From p_j = e^z_j / sum_k e^z_k: for i = j, d p_j / d z_i = p_j (1 - p_j); for i != j it is "
         "-p_j p_i. One formula holds both: p_j (delta_ij - p_i).",
         "The chain rule sums over j: dz_i = sum_j dp_j p_j (delta_ij - p_i), which collapses to "
         "dz_i = p_i * (dp_i - sum_j dp_j * p_j). Compute the sum once per row.",
         "(dp * p).sum(axis=-1, keepdims=True) is that sum with shape (..., 1), which broadcasts against "
         "the row; subtract it from dp and multiply by p."),
    20: ("Run the forward first (your masked_attention) to get the weights a; then go back through its "
         "three steps in reverse: out = a @ v, a = softmax(z), z = q @ k.T * s with s = 1/sqrt(head_dim).",
         "Through out = a @ v: dv is a transposed times dout, and da is dout times v transposed. Through "
         "the softmax: dz is your softmax_backward of da, given a (a masked entry has weight 0 and passes "
         "nothing back).",
         "Through the scores: dq = dz @ k, dk = dz transposed @ q, each times s."),
    21: ("Two moves, one after the other: first every weight shrinks by the fraction lr * weight_decay of "
         "itself (its gradient plays no part in it), then your adam_step takes Adam's step from the gradients.",
         "The shrink is a multiplication of each p.data by (1 - lr * weight_decay), for every parameter. Then "
         "call your adam_step with the same params, m, v, t, lr and the beta1, beta2 and eps passed in: it "
         "updates m and v, moves the weights and sets each .grad back to 0.0.",
         "Leave p.grad alone: adding weight_decay * p.data to it would be L2 regularization, which Adam's "
         "division by sqrt(v_hat) rescales weight by weight. And shrink before the step, not after it."),
    22: ("y = f * x is a multiplication by a constant of the step, entry by entry: its slope in x_i is "
         "f_i. A dropped number (f = 0) passed nothing on, and gets nothing back.",
         "One factor per number does both directions: f = 1 / (1 - p) where kept is True, 0 where it is "
         "False. The forward multiplies x by it, the backward multiplies dy by the same f.",
         "kept / (1 - p) is that factor as an array: numpy reads True as 1 and False as 0. Return (x * f, "
         "dy * f), two new arrays; p = 0 gives f = 1 everywhere, y = x and dx = dy."),
    23: ("Pair each id with the one after it: zip(ids, ids[1:]) gives every adjacent pair once, "
         "overlapping ones included.",
         "Start from an empty dict and add one per pair: counts[pair] = counts.get(pair, 0) + 1. A "
         "tuple (a, b) is a dict key as it is."),
    24: ("Walk the list with an index i you move yourself (a while loop), so that you can step over "
         "two ids at once.",
         "If i + 1 < len(ids) and (ids[i], ids[i + 1]) is the pair, append new_id and add 2 to i; "
         "otherwise append ids[i] and add 1. Append to a new list: never change ids."),
    25: ("The table's order is the rule: merge k was learned before merge k + 1, and may be what k + 1 "
         "is built from. Give each pair its rank k in a dict.",
         "Loop: take the pairs of your get_stats(ids) that are in the table; stop when none is; else "
         "merge the one of lowest rank with your merge(ids, pair, 256 + k)."),
    26: ("One pair at a time: for m from 0 to head_dim // 2 - 1, a = x[2m] and b = x[2m + 1] are a point "
         "(a, b), and its turn by theta is a rotation of the plane.",
         "theta is a plain number, pos_id * 10000.0 ** (-2 * m / head_dim); take c = math.cos(theta) and "
         "s = math.sin(theta) once per pair.",
         "The turned pair is (a * c - b * s, a * s + b * c): append both, in that order, to a new list. Only "
         "a and b are Values, so the gradient flows through them."),
    27: ("Per pair, y = M x with M = [[cos, -sin], [sin, cos]]: a product by a 2 x 2 matrix, whose backward "
         "your exercise 18 knows (each x_i reaches y_j through M[j][i]).",
         "So dx = M^T dy, and M^T = [[cos, sin], [-sin, cos]] is the turn by -theta, since cos(-t) = cos t and "
         "sin(-t) = -sin t: the backward turns dy back by the same angle.",
         "On arrays: theta = pos[:, None] * the head_dim // 2 frequencies, (T, head_dim // 2); dy[:, 0::2] "
         "and dy[:, 1::2] are every pair's a and b. Fill a new array's even columns with a cos + b sin and "
         "its odd ones with b cos - a sin."),
    28: ("group = n_head // n_kv_head query heads share each kv head: with 4 and 2, heads 0 and 1 read kv "
         "head 0, heads 2 and 3 kv head 1.",
         "Query head h reads kv head h // group, whose numbers start at (h // group) * head_dim in every "
         "key and value; its own query starts at h * head_dim.",
         "For each h: slice q's head, slice that kv head out of every cached key and value, call your "
         "attention_head on the three, and add its out (not its weights) to the list of outputs."),
}
