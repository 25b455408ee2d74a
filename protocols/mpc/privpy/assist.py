"""The four-server topology of PrivPy's protocols (DESIGN §5, §6) and the one
checked send of a server pair's messages to an assistant.

S1 and S2 hold the shares; T1 assists S1 and T2 assists S2 (each pair has
its own PRG stream). In every protocol round that involves an assistant,
both servers send it one message each: its own server's carries the nonces
of the S1-S2 stream and of their shared stream as headers, the other
server's carries its S1-S2 nonce. Before the assistant uses a message, it
checks that both streams are in step (channel.check_stream): a protocol
call that failed between the two servers' kernels would otherwise leave
masks that no longer cancel. `send_to_assistant` is that handshake, used by
the multiplication (backend.py) and every garbled circuit (circuits.py).
"""
from __future__ import annotations

from typing import Mapping, Sequence, Tuple

import tensorflow as tf

#: the share holders, by party index
SERVERS = ("S1", "S2")
#: each server and the assistant it shares a stream with for re-sharing
PAIRS = (("S1", "T1"), ("S2", "T2"))


def send_to_assistant(rt, own: int, mine: tf.Tensor, theirs: tf.Tensor,
                      n12: Mapping[int, tf.Tensor], n_server: tf.Tensor,
                      after: Sequence[tf.Tensor] = ()
                      ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """Sends server `own`'s message `mine` and the other server's `theirs` to
    own's assistant T, and checks the streams there.

    Args:
      rt: the Runtime.
      own: the party index (0: S1 with T1, 1: S2 with T2).
      mine, theirs: the two messages, on their senders' devices.
      n12: {party index: that server's nonce of the S1-S2 stream} of this call.
      n_server: own server's nonce of its stream with T (taken on the server).
      after: tensors T's stream step waits for (control dependencies), so a
        refused run advances no counter.

    Returns:
      (mine, theirs) on T, `mine` passed through both stream checks (use it
      in place of the message), and T's (key, nonce) of its stream with its
      server.
    """
    server, t = PAIRS[own]
    other = SERVERS[1 - own]
    (mine_t,), (n12_own, n_st) = rt.send(server, t, mine, headers=(n12[own], n_server))
    (theirs_t,), (n12_other,) = rt.send(other, t, theirs, headers=(n12[1 - own],))
    with tf.control_dependencies(list(after)):
        kt, nt = rt.key_material(server, t, t)
    mine_t = rt.check_stream("S1", "S2", t, n12_own, n12_other, other, mine_t)
    mine_t = rt.check_stream(server, t, t, nt, n_st, server, mine_t)
    return mine_t, theirs_t, kt, nt
