"""python -m tf_privpy.convert MODEL: what converting a saved Keras model
would give, without running anything private.

Loads MODEL (a .keras / .h5 file or a SavedModel directory), traces and
rewrites it, and prints the summary (layers and TF ops), the cost bill of
one prediction (rounds, multiplications, comparisons, bytes per server
pair) and every node that cannot be converted. Exits 1 if any cannot.

  python -m tf_privpy.convert model.keras --batch-size 100 --weights public
"""
from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tf_privpy.convert",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a saved Keras model (.keras, .h5) or SavedModel directory")
    ap.add_argument("--batch-size", type=int, default=1, help="batch of the cost bill")
    ap.add_argument("--inputs", choices=("private", "public"), default="private")
    ap.add_argument("--weights", choices=("private", "public"), default="private")
    ap.add_argument("--ring", type=int, choices=(128, 64), default=128)
    ap.add_argument("--no-passes", action="store_true",
                    help="turn the optimizer passes off (converters/passes.py)")
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    import tf_privpy as tp
    if not os.path.exists(args.model):
        print(f"error: {args.model} does not exist", file=sys.stderr)
        return 2
    tp.init(tp.Config(ring_bits=args.ring))
    model = tf.keras.models.load_model(args.model, compile=False)
    try:
        private = tp.keras.convert(model, policy=tp.Policy(args.inputs, args.weights),
                                   passes=False if args.no_passes else None)
    except tp.UnsupportedOpError as e:
        print(str(e), file=sys.stderr)
        return 1
    print(private.summary(batch_size=args.batch_size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
else:
    # Imported (`import tf_privpy.convert`): the import system binds the
    # package's attribute `convert` to sys.modules[__name__] once this module
    # has run, which would replace the function tp.convert by this module.
    # Binding that entry to the function keeps tp.convert the function; the
    # command line is `python -m tf_privpy.convert`, which runs this file as
    # __main__ and never reaches here.
    import tf_privpy as _tp
    sys.modules[__name__] = _tp.convert
