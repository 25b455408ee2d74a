"""tp.math: the tf.math-style namespace of tf_privpy."""
from tf_privpy.compare_ops import (abs, argmax, argmin, equal, greater, greater_equal,  # noqa: F401,A004
                                   less, less_equal, maximum, minimum, not_equal,
                                   reduce_max, reduce_min, sign, top_k)
from tf_privpy.math_fns import (divide, exp, log, reciprocal, rsqrt, sigmoid,  # noqa: F401
                                sqrt, tanh)
from tf_privpy.math_ops import (add, multiply, negative, reduce_mean,  # noqa: F401
                                reduce_sum, subtract)
