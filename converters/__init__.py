"""tf_privpy.converters: graph-rewriting passes (GraphDef -> private graph).

The Keras/tf.function converter (DESIGN §8) is built in a later issue; this
package exists so the layer order tf_privpy -> converters -> protocols -> ops
is fixed from the start. It exports nothing yet.
"""
