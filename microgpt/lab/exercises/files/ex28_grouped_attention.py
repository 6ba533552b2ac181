"""
Exercise 28 (a modern rung): grouped-query attention, one position's heads over a KV cache whose
keys and values have fewer heads than the queries (the real one: the head loop in step 2 of
microgpt/model.py's gpt(), with config.n_kv_head set).

microgpt gives every query head its own head of keys and values. At long contexts the KV cache
is what fills a GPU's memory, so large models share: n_kv_head heads of keys and values, each
read by a group of n_head // n_kv_head consecutive query heads. n_kv_head = n_head is microgpt's
attention; n_kv_head = 1 (every query head reading the same keys) is multi-query attention.

It uses your attention_head (12) for each head. Reading: docs/modern.md, grouped-query
attention. See it live: `python -m microgpt.lab phases anna` (all heads, side by side).
Then run `python -m microgpt.lab exercises check 28`.
"""

from ex12_attention_head import attention_head


def grouped_attention(q, keys, values, n_head, n_kv_head):
    """The n_head heads' outputs, side by side: n_head * head_dim Values.

    q: n_head * head_dim Values, query head h in q[h * head_dim : (h + 1) * head_dim].
    keys, values: one vector per visible position (0..i, the cache), each n_kv_head * head_dim
    Values, kv head j in [j * head_dim : (j + 1) * head_dim]. n_kv_head divides n_head.
    Query head h attends (your attention_head) over the keys and values of the kv head of its
    group: heads 0 .. group - 1 share kv head 0, the next group kv head 1, and so on, a group
    being n_head // n_kv_head consecutive query heads.
    """
    # solution
    head_dim = len(q) // n_head
    group = n_head // n_kv_head
    out = []
    for h in range(n_head):
        ks = h // group * head_dim  # the first dimension of its kv head
        k_h = [k_j[ks:ks + head_dim] for k_j in keys]
        v_h = [v_j[ks:ks + head_dim] for v_j in values]
        head_out, _ = attention_head(q[h * head_dim:(h + 1) * head_dim], k_h, v_h)
        out += head_out
    return out
    # end solution
