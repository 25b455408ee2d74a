"""NoisePool: Paillier noise values (r^n mod n^2, each an encryption of 0)
computed ahead, in a background thread, and handed out exactly once.

Encrypting with pooled noise costs one product mod n^2 (microseconds)
instead of an exponentiation (milliseconds), so a party that knows only the
public key can precompute while it waits for data. Each value is removed
from the pool when handed out; a value used twice would reveal the
difference of the two plaintexts, so the pool never hands one out again and
never recycles. When it cannot serve a request, take() waits for the
background filler if that will produce enough, and otherwise raises
NoisePoolExhaustedError: the pool never refills on its own (call refill()),
so the cost of noise generation never appears where it was not planned.

The pool lives in Python, so take() must run eagerly: inside a tf.function
the values taken at trace time would be baked into the graph and reused on
every call. Take noise eagerly and pass it into the function as an argument.
"""
from __future__ import annotations

import threading
import time
from typing import Optional, Union

import tensorflow as tf

from . import kernels as K
from .paillier import NoisePoolExhaustedError, PaillierError, PrivateKey, PublicKey
from .progress import Progress, ProgressReporter


class NoisePool:
    """Precomputed noise values for `key`, filled in a background thread.

    Args:
      key: a PublicKey (generic noise r^n mod n^2) or a PrivateKey (CRT noise,
        about 4x cheaper to make; same distribution).
      method: "generic" (default) or "djn" (public key only: DJN fixed-base
        noise, several times cheaper, resting on DJN's extra assumption).
      size: how many values to make now (more with refill()).
      chunk: values made per kernel call (the kernel spreads a chunk over all
        CPU threads).
      start: start filling at once (else call refill() or start()).
      progress: True prints progress lines to stderr (at most one a second
        and one at the end); False is silent; a callable gets (done, total,
        elapsed seconds) after each chunk.

    Example:
      >>> pool = NoisePool(pk, 1000)          # fills in the background
      >>> c = encrypt(pk, x, noise=pool)      # takes x.size values (waits if needed)
    """

    def __init__(self, key: Union[PublicKey, PrivateKey], size: int, *, chunk: int = 64,
                 start: bool = True, progress: Progress = True, method: str = "generic"):
        if not isinstance(key, (PublicKey, PrivateKey)):
            raise TypeError(f"NoisePool needs a PublicKey or PrivateKey, got {type(key).__name__}")
        if method not in ("generic", "djn"):
            raise ValueError(f"method must be 'generic' or 'djn', got {method!r}")
        if method == "djn" and isinstance(key, PrivateKey):
            key = key.public_key  # DJN noise needs only the public key
        self._method = method
        if size < 0 or chunk < 1:
            raise ValueError("size must be >= 0 and chunk >= 1")
        self._key = key
        self._chunk = int(chunk)
        self._progress = progress
        self._cond = threading.Condition()
        self._values: list = []       # made, not yet handed out
        self._target = int(size)      # values still to make
        self._made = 0
        self._handed_out = 0
        self._thread: Optional[threading.Thread] = None
        self._running = False         # set and cleared under the lock
        self._stop = False
        self._error: Optional[BaseException] = None
        self._started_at = time.monotonic()
        if start:
            self.start()

    # ------------------------------------------------------------- state
    @property
    def available(self) -> int:
        """Values ready to hand out now."""
        with self._cond:
            return len(self._values)

    @property
    def pending(self) -> int:
        """Values the filler has still to make."""
        with self._cond:
            return self._target

    @property
    def handed_out(self) -> int:
        with self._cond:
            return self._handed_out

    def __repr__(self) -> str:
        return (f"<NoisePool available={self.available} pending={self.pending} "
                f"handed_out={self.handed_out}>")

    # ------------------------------------------------------------ filling
    def start(self) -> None:
        """Starts the background filler if there is work and it is not running."""
        with self._cond:
            if self._running or self._target == 0:
                return
            self._running = True
            self._stop = False
            self._started_at = time.monotonic()
            self._thread = threading.Thread(target=self._fill, name="paillier-noise-pool",
                                            daemon=True)
            self._thread.start()

    def refill(self, count: int) -> None:
        """Makes `count` more values (in the background)."""
        if count < 0:
            raise ValueError("count must be >= 0")
        with self._cond:
            self._target += int(count)
        self.start()

    def wait(self, timeout: Optional[float] = None) -> None:
        """Blocks until the filler stops: every pending value made (or closed)."""
        with self._cond:
            if not self._cond.wait_for(lambda: not self._running, timeout):
                raise TimeoutError(f"noise pool still has {self._target} values to make")
            self._raise_error()

    def close(self) -> None:
        """Stops the filler after its current chunk; values made stay usable."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _make(self, count: int) -> list:
        if isinstance(self._key, PrivateKey):
            t = K.paillier_noise_crt(*self._key.key_tensors(), count)
        else:
            t = K.paillier_noise(self._key.n_tensor(), count, method=self._method)
        return t.numpy().tolist()

    def _fill(self) -> None:
        reporter = ProgressReporter(self._progress, 0, "paillier NoisePool", "noise values",
                                    started_at=self._started_at)
        try:
            while True:
                with self._cond:
                    if self._stop or self._target == 0:
                        self._running = False  # decided under the lock: refill restarts
                        self._cond.notify_all()
                        return
                    count = min(self._chunk, self._target)
                values = self._make(count)
                with self._cond:
                    self._values.extend(values)
                    self._made += count
                    self._target -= count
                    done, total = self._made, self._made + self._target
                    self._cond.notify_all()
                reporter.update(done, total)
        except BaseException as e:  # surfaced by take()/wait()
            with self._cond:
                self._error = e
                self._running = False
                self._cond.notify_all()

    def _raise_error(self) -> None:
        if self._error is not None:
            raise PaillierError(f"the noise pool's filler failed: {self._error}") from self._error

    # ------------------------------------------------------------ handing out
    def take(self, count: int, timeout: Optional[float] = None) -> tf.Tensor:
        """Removes `count` values from the pool and returns them (tf.string
        [count]). Waits for the filler when it will make enough; raises
        NoisePoolExhaustedError when the pool cannot serve `count`."""
        if not tf.executing_eagerly():
            raise PaillierError(
                "NoisePool.take() inside tf.function would bake the noise into the traced "
                "graph and reuse it on every call (reused noise reveals plaintext "
                "differences). Take the noise eagerly and pass it to the function: "
                "noise = pool.take(n); f(x, noise)")
        count = int(count)
        if count < 0:
            raise ValueError("count must be >= 0")
        with self._cond:
            self._raise_error()
            running = self._running and not self._stop
            if len(self._values) + (self._target if running else 0) < count:
                raise NoisePoolExhaustedError(
                    f"the noise pool has {len(self._values)} values ready and "
                    f"{self._target if running else 0} being made, but {count} were asked "
                    f"for; call pool.refill({count - len(self._values)}) (and wait) or make "
                    "a larger pool. Noise values are never reused.")
            if not self._cond.wait_for(
                    lambda: len(self._values) >= count or not self._running or self._stop,
                    timeout):
                raise NoisePoolExhaustedError(
                    f"timed out waiting for {count} noise values ({len(self._values)} ready)")
            self._raise_error()
            if len(self._values) < count:
                raise NoisePoolExhaustedError(
                    f"the pool stopped with {len(self._values)} values ready, fewer than the "
                    f"{count} asked for; call pool.refill({count - len(self._values)})")
            taken, self._values = self._values[:count], self._values[count:]
            self._handed_out += count
        return tf.constant(taken, tf.string, shape=[count])
