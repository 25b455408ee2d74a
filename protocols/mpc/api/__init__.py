"""The private values and their ops (DESIGN §2): PrivateTensor, tp.Variable, the op
registry and TF dispatch, control flow (tp.cond) and checkpoints."""
