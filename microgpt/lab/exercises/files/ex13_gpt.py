"""
Exercise 13: gpt(), one position of the whole model (the real one: microgpt/model.py, GPT.gpt).

This is the model: one token and its position in, one logit per token id out, the keys and
values of this position left in the cache for the positions after it. It uses your linear
(9), rmsnorm (11) and attention_head (12); the engine's .relu() is your exercise 5.

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
      0..pos_id-1. Append this position's k and v to keys[li] and values[li] BEFORE attending:
      a query always sees itself.
    The steps:
      1) x = wte[token_id] + wpe[pos_id], element by element; then x = rmsnorm(x) (not
         redundant: the stream carries this normalised vector on)
      2) for each layer: keep x as the residual; rmsnorm; q, k, v = linear(x, attn_wq/wk/wv);
         append k and v to the cache; for each head h, slice dimensions h*head_dim ..
         (h+1)*head_dim - 1 of q and of every cached k and v, and run attention_head; put the
         heads' outputs side by side (n_embd numbers); linear(., attn_wo); add the residual
      3) MLP: keep x as the residual; rmsnorm; linear(., mlp_fc1); relu() on each; linear(.,
         mlp_fc2); add the residual
      4) logits = linear(x, lm_head) (no final norm, as in microgpt)
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
