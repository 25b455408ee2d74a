"""Issue 28's accuracy requirement: a private training of TF-Encrypted's
benchmark (benchmarks/tfe_suite.py) ends within 0.5 % held-out accuracy of
plaintext Keras' training from the same initial weights on the same batches
(float32 Keras, the same optimizer and learning rate), after a few hundred
steps of batch 128 on the 4,000 shipped digits, checked on the 1,000
held-out ones. The rows are the suite's own (its run_row, learning rates and
batches), in the library's default 128-bit ring.

Network A's Adam row (about 0.5 s a step since the leading one's bit
decomposition: 612 MB a step) and network D's SGD row (about 0.11 s since
the polyphase filter gradient) are trained here too. Left to `benchmarks/tfe_suite.py` (--train_models; --full
every row): network A under AMSgrad (Adam's update and one private maximum
per weight), networks B and C (1-2.4 s a step under SGD, 1.2-5 s under Adam
and AMSgrad: 200 steps of C are 8-17 minutes) and D under Adam and AMSgrad;
the README's TF-Encrypted table gives their accuracies and step counts."""
import os
import sys

import pytest

import tf_privpy as tp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import tfe_suite  # noqa: E402  (benchmarks/ is not a package)

#: steps per model: "a few hundred" (issue 28); LR's are cheap
STEPS = {"lr": 300, "network_a": 200, "network_d": 200}
#: (model, optimizer) rows a test trains (see above for the others)
ROWS = [("lr", o) for o in tfe_suite.OPTIMIZERS] + [("network_a", "sgd"), ("network_a", "adam"),
                                                     ("network_d", "sgd")]
#: issue 28: within 0.5 % of the same plaintext training
TOLERANCE = 0.005


@pytest.fixture(scope="module")
def data():
    return tfe_suite.load_data(full=False)


@pytest.fixture(scope="module")
def ring128():
    tp.reset()
    tp.init(tp.Config(ring_bits=128))
    yield 128
    tp.reset()
    tp.init()


@pytest.mark.slow
@pytest.mark.long  # a few hundred training steps are what it checks
@pytest.mark.parametrize("model,opt", ROWS, ids=[f"{m}-{o}" for m, o in ROWS])
def test_accuracy_within_half_a_percent_of_plaintext(model, opt, data, ring128):
    row = tfe_suite.run_row(ring128, model, opt, data, STEPS[model], {})
    acc, ref = row["accuracy"], row["plaintext_accuracy"]
    print(f"\n{model} {opt}: {row['trained_steps']} steps, {row['step_s']['median_s']:.3f} "
          f"s/step, held-out accuracy {100 * acc:.2f} % vs plaintext {100 * ref:.2f} %")
    assert row["trained_steps"] == STEPS[model]
    assert abs(acc - ref) <= TOLERANCE, (model, opt, acc, ref)
    # the training learnt something: well above chance (LR: 50 %, networks: 10 %)
    assert ref > (0.7 if model == "lr" else 0.6), ref
