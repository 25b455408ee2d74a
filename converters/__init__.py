"""tf_privpy.converters: the graph-rewriting pass (DESIGN §8).

A Keras model or a tf.function is traced to a ConcreteFunction, frozen, and
its GraphDef rewritten node by node into private computation placed on S1,
S2, T1 and T2, every node through the op registry (protocols/mpc/api/registry.py).

  trace.py    tracing, freezing, which constants are weights, Keras layers,
              graph walks
  passes.py   optimizer passes between trace and analyse (BatchNorm folding,
              ReLU after max-pooling, common factors, dots, batching)
  rewrite.py  the policy, the analysis (every unsupported node in one error),
              the evaluation of the rewritten graph
  owner.py    owner-side inputs: what depends on one plaintext input alone,
              computed by its owner before sharing (Policy.owner_side)
  loops.py    While nodes with a public condition as tf.while_loops over
              PrivateTensors (Keras's recurrent layers)
  masks.py    Keras's additive attention masks brought into the fixed-point
              range
  model.py    PrivateModel: predict, graph, cost, summary
  training.py the training half: a traced SGD step rewritten so weights
              stay private across steps (trace_step, analyse_step,
              evaluate_step)
  trainer.py  PrivateTrainer and convert_training (tp.keras.convert_training)
  federated.py      a federated step's cross-client reductions found and
                    checked (tp.federated.convert, docs/federated.md)
  federated_run.py  the rewritten step run: each client's nodes on its
                    device, the reductions as a secure aggregation (mpc
                    shares on S1/S2, or BatchCrypt)

The TF op types the converter accepts and their adapters are rows of the
op table (protocols/mpc/api/registry.py, adapters.py, grad_adapters.py).
"""
from .model import PrivateModel, convert, supported_ops
from .rewrite import Policy, Problem, UnsupportedOpError
from .trainer import PrivateTrainer, convert_training

__all__ = ["PrivateModel", "PrivateTrainer", "Policy", "Problem", "UnsupportedOpError",
           "convert", "convert_training", "supported_ops"]
