"""The fixed-point numerics on shares (DESIGN §7): exp, log, reciprocal, sqrt,
sigmoid, tanh, softmax, their range reduction and fast mode."""
