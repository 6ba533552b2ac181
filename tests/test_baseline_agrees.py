"""
The speed baseline (bench/baseline_microgpt.py) computes exactly what microgpt computes, so that
bench/train_speed.py's ratio compares the same math: from the same weights, every gradient of the
first name and the loss at every step of a short run agree.
"""

from helpers import bench_script
from microgpt.model import GPT, GPTConfig
from microgpt.optim import Adam
from microgpt.tokenizer import CharTokenizer
from microgpt.training import doc_loss, doc_tokens, learning_rate, train_step

BASELINE = bench_script('baseline_microgpt')
BaselineGPT, BaselineTrainer = BASELINE.BaselineGPT, BASELINE.BaselineTrainer

TOL = 1e-9  # same math, different rounding order: differences are ~1e-16, far below this
LR = 0.01
# 'ava' after 'emma' uses neither e nor m and fewer positions; 'isabella' is cut at the block
NAMES = ['emma', 'ava', 'isabella', 'liam', 'mia']
N_HEAD = 2


def tiny_model():
    tokenizer = CharTokenizer.from_docs(NAMES)
    config = GPTConfig(vocab_size=tokenizer.vocab_size, n_layer=2, n_embd=8, n_head=N_HEAD,
                       block_size=8)
    return GPT(config, seed=7, tokenizer=tokenizer)


def test_first_step_gradients_agree_for_every_parameter():
    model = tiny_model()
    baseline = BaselineGPT(model.weights(), N_HEAD)
    tokens = doc_tokens(model.tokenizer, NAMES[0])
    ours = doc_loss(model, tokens)
    theirs = baseline.loss(tokens)
    assert abs(ours.data - theirs.data) <= TOL
    ours.backward()
    theirs.backward()
    worst = max((abs(p.grad - q.grad), name)
                for name in model.state_dict
                for row_p, row_q in zip(model.state_dict[name], baseline.state_dict[name])
                for p, q in zip(row_p, row_q))
    assert worst[0] <= TOL, f"largest gradient difference {worst[0]:.3e} is in {worst[1]}"
    # not vacuous: a real gradient flowed to the parameters
    assert max(abs(p.grad) for p in model.params) > 1e-3


def test_losses_agree_at_every_step_of_a_short_training_run():
    model = tiny_model()
    steps = len(NAMES)
    trainer = BaselineTrainer(BaselineGPT(model.weights(), N_HEAD), steps=steps, lr=LR)
    optimizer = Adam(model.params)
    for step, name in enumerate(NAMES):
        tokens = doc_tokens(model.tokenizer, name)
        ours = train_step(model, optimizer, tokens, learning_rate(LR, step, steps))
        theirs = trainer.train_step(tokens, step)
        assert abs(ours - theirs) <= TOL, (
            f"step {step} ({name!r}): ours {ours!r}, baseline {theirs!r}; if step 0 agreed, look "
            "for state carried between steps (e.g. a parameter's grad left from the last step)")


def test_the_tolerance_notices_one_weight_moved_by_a_millionth():
    # negative control: if this failed, agreement within TOL above would prove little
    model = tiny_model()
    tokens = doc_tokens(model.tokenizer, NAMES[0])
    weights = model.weights()
    weights['lm_head'][tokens[1]][0] += 1e-6  # the logit of the first target: a weight that matters
    ours = doc_loss(model, tokens).data
    theirs = BaselineGPT(weights, N_HEAD).loss(tokens).data
    assert abs(ours - theirs) > TOL
