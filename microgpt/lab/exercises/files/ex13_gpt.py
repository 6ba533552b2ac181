"""
Exercise 13: gpt(), one position of the whole model (the real one: microgpt/model.py, GPT.gpt).

This is the model: one token and its position in, one logit per token id out, the keys and
values of this position left in the cache for the positions after it. It uses your linear
(9), rmsnorm (11) and attention_head (12); the engine's .relu() is your exercise 5.

What a Value offers (microgpt/engine.py): .data (its number) and .grad; the arithmetic
a + b, a - b, a * b, a / b, -a (with a number on either side, 2 * a or a + 1.0 too); a ** n for
a constant n; and .exp(), .log(), .relu(). Each builds a new Value that remembers its inputs.

Reading: docs/reading-guide.md, section 1, file 6: gpt() in its numbered steps. See it live:
`python -m microgpt.lab phases anna` (each phase beside gpt()'s lines), `overview anna`.
Then run `python -m microgpt.lab exercises check 13`.
"""

from ex09_linear import linear
from ex11_rmsnorm import rmsnorm
from ex12_attention_head import attention_head


def gpt(token_id, pos_id, keys, values, state_dict, config):
    """The logits (vocab_size Values) for the token after `token_id`, at position `pos_id`.

    state_dict: microgpt's weights by name, each a matrix of Values stored [n_out][n_in]:
      'wte' (vocab_size rows), 'wpe' (block_size rows), 'lm_head', and for each layer li:
      f'layer{li}.attn_wq', '.attn_wk', '.attn_wv', '.attn_wo', '.mlp_fc1', '.mlp_fc2'.
    config: .n_layer, .n_embd, .n_head (head_dim = n_embd // n_head).
    keys, values: the KV cache, one list per layer of the k and v vectors of positions
      0..pos_id-1. This position's k and v join the cache BEFORE it attends: a query always
      sees itself. On return, keys[li] and values[li] hold one more vector each.
    The model, as docs/reading-guide.md section 1, file 6 numbers it: the token's embedding
    plus its position's, normalised; then per layer an attention block and an MLP block, each
    normalising its input and adding its output back to the stream it read (the residual);
    attention splits n_embd into n_head heads of head_dim dimensions, each one attention_head
    over its slice, the heads side by side then mixed by attn_wo; the MLP is fc1, ReLU, fc2;
    last, the logits are lm_head @ x, with no final norm (as in microgpt).
    `python -m microgpt.lab exercises hint 13` gives the steps, one level at a time.
    """
    # solution
    sd = state_dict
    head_dim = config.n_embd // config.n_head
    # 1) token + position, normalised
    x = [t + p for t, p in zip(sd['wte'][token_id], sd['wpe'][pos_id])]
    x = rmsnorm(x)
    for li in range(config.n_layer):
        # 2) attention over positions 0..pos_id
        x_residual = x
        x = rmsnorm(x)
        q = linear(x, sd[f'layer{li}.attn_wq'])
        k = linear(x, sd[f'layer{li}.attn_wk'])
        v = linear(x, sd[f'layer{li}.attn_wv'])
        keys[li].append(k)
        values[li].append(v)
        x_attn = []
        for h in range(config.n_head):
            hs = h * head_dim
            head_out, _ = attention_head(q[hs:hs + head_dim],
                                         [k_j[hs:hs + head_dim] for k_j in keys[li]],
                                         [v_j[hs:hs + head_dim] for v_j in values[li]])
            x_attn.extend(head_out)
        x = linear(x_attn, sd[f'layer{li}.attn_wo'])
        x = [a + b for a, b in zip(x, x_residual)]
        # 3) MLP
        x_residual = x
        x = rmsnorm(x)
        x = linear(x, sd[f'layer{li}.mlp_fc1'])
        x = [xi.relu() for xi in x]
        x = linear(x, sd[f'layer{li}.mlp_fc2'])
        x = [a + b for a, b in zip(x, x_residual)]
    # 4) one score per token id
    return linear(x, sd['lm_head'])
    # end solution
