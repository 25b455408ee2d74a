"""Private op implementations with their operand rules (broadcasting, dtype
rules, public/private mixing, exact public floats) and compositions.

Users reach them through the op registry (../registry.py), which the tp.*
functions, the TF dispatchers, the converter and the supported-ops table all
read:
  math_ops     share, reveal, + - *, matmul, tensordot, sums and means
  compare_ops  comparisons and what is built on them (max, relu, sort, ...)
  array_ops    local shape operations (reshape, slicing, concat, pad, ...)
  math_fns     derived functions (reciprocal, divide, sqrt, exp, log, ...)
  nn           convolution, pooling and the nn compositions
"""
