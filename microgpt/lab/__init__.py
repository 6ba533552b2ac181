"""
The lab: the sandboxes and their checkable numbers, as terminal commands, one per
sandbox of registry.SANDBOXES (`python -m microgpt.lab --help` lists them), and as web pages.

    python -m microgpt.lab overview anna          # next-character bars, loss, one continuation
    python -m microgpt.lab attention anna         # one head, one query, every step of attention
    python -m microgpt.lab byhand                 # attention on q, k, v typed by hand
    python -m microgpt.lab phases anna            # attention in phases, beside gpt()'s lines
    python -m microgpt.lab autograd "(a + b) * c" a=2 b=-3 c=10
    python -m microgpt.lab scaling                # why the scores are divided by sqrt(head_dim)
    python -m microgpt.lab loss out/model.log.jsonl
    python -m microgpt.lab sampling ma            # temperature and top-k, side by side
    python -m microgpt.lab step anna              # one training step: gradients, Adam, the loss after
    python -m microgpt.lab embeddings             # wte on its principal components, wpe similarity
    python -m microgpt.lab tokens "the king"      # text cut into the model's tokens, and its merges
    python -m microgpt.lab serve                  # all of it as local web pages, with live training
    python -m microgpt.lab exercises start        # write the engine and the GPT yourself (exercises/)

tests/test_lab_registry.py checks that these examples name every command the registry has.
"""
