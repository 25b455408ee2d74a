"""tf_privpy.converters: the graph-rewriting pass (DESIGN §8).

A Keras model or a tf.function is traced to a ConcreteFunction, frozen, and
its GraphDef rewritten node by node into private computation placed on S1,
S2, T1 and T2, every node through the op registry (protocols/mpc/registry.py).

  trace.py    tracing, freezing, which constants are weights, Keras layers
  tf_ops.py   TF op type -> registry implementation (attribute mapping)
  passes.py   optimizer passes between trace and analyse (BatchNorm folding,
              ReLU after max-pooling, common factors, dots, batching)
  rewrite.py  the policy, the analysis (every unsupported node in one error),
              the evaluation of the rewritten graph
  model.py    PrivateModel: predict, graph, cost, summary
  grad_ops.py adapters of the ops a training step adds (gradients, fused
              losses, GradientTape bookkeeping)
  training.py the training half: a traced SGD step rewritten so weights
              stay private across steps (PrivateTrainer, convert_training)
"""
from .model import PrivateModel, convert, supported_ops
from .rewrite import Policy, Problem, UnsupportedOpError
from .training import PrivateTrainer, convert_training

__all__ = ["PrivateModel", "PrivateTrainer", "Policy", "Problem", "UnsupportedOpError",
           "convert", "convert_training", "supported_ops"]
