"""S1's and S2's share services as local processes, and a load measurement.

For tests, benchmarks and `tf_privpy.cluster local`:

    >>> with LocalShareServices("certs", "stores") as svc:    # makes the folders if missing
    ...     cluster = svc.cluster("alice")                    # alice's key made and enrolled
    ...     print(concurrent_uploads(cluster, n=50, share_bytes=1 << 20))

Each service is a process running server.main(). It is launched without
tf_privpy/__init__'s TensorFlow import (the service needs none, and the import
takes ~10 s); `python -m tf_privpy.deploy.service.server` runs the same main().
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from tf_privpy.deploy.service import ca
from tf_privpy.deploy.service.client import ServiceCluster, ShareClient

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
#: imports tf_privpy.deploy.service under a bare tf_privpy package (argv[1]: the
#: folder holding tf_privpy/), then runs the server's main()
LAUNCHER = """
import sys, types
root = sys.argv.pop(1)
pkg = types.ModuleType("tf_privpy")
pkg.__path__ = [root + "/tf_privpy"]
sys.modules["tf_privpy"] = pkg
from tf_privpy.deploy.service import server
sys.exit(server.main(sys.argv[1:]))
"""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class LocalService:
    """One share service process (S1 or S2) on loopback; keeps its port
    across restarts."""

    launcher = LAUNCHER

    def __init__(self, role: str, cert_dir: str, store_dir: str,
                 max_record_bytes: Optional[int] = None, ring_bits: int = 128,
                 extra_args: Sequence[str] = ()):
        self.role, self.cert_dir, self.store_dir = role, cert_dir, store_dir
        self.max_record_bytes, self.ring_bits = max_record_bytes, ring_bits
        self.extra_args = list(extra_args)  # more flags of server.main (e.g. limits)
        self.port = free_port()
        self.proc: Optional[subprocess.Popen] = None

    def args(self) -> List[str]:
        a = ["--role", self.role, "--port", str(self.port), "--cert-dir", self.cert_dir,
             "--store-dir", self.store_dir, "--ring-bits", str(self.ring_bits)]
        if self.max_record_bytes:
            a += ["--max-record-bytes", str(self.max_record_bytes)]
        return a + self.extra_args

    def start(self, timeout: float = 60.0) -> "LocalService":
        self.proc = subprocess.Popen([sys.executable, "-c", self.launcher, _ROOT] + self.args(),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready: Dict[str, str] = {}
        t = threading.Thread(target=lambda: ready.update(line=self.proc.stdout.readline()),
                             daemon=True)
        t.start()
        t.join(timeout)
        line = ready.get("line", "")
        if not line:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            err = self.proc.stderr.read()  # before stop() closes it
            self.stop()
            raise RuntimeError(f"the share service {self.role} did not start: {err[-2000:]}")
        if json.loads(line)["port"] != self.port:
            raise RuntimeError(f"{self.role} reported another port: {line}")
        return self

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def has(self, name: str) -> bool:
        """Whether the store holds a visible record `name`."""
        return os.path.exists(os.path.join(self.store_dir, "records", name + ".rec"))

    def pending(self) -> List[str]:
        """The store's temp files (uploads in progress)."""
        return os.listdir(os.path.join(self.store_dir, "tmp"))


class LocalShareServices:
    """S1's and S2's services with stores under store_root/s1, /s2 and every
    folder of the cluster under cert_dir, for trying things on one machine
    (ca.local_tree: cert_dir/ca, cert_dir/s1, cert_dir/s2 and one folder per
    owner, cert_dir/owners/NAME; made when missing). Each service runs with
    its own folder only, which holds no key but its own."""

    service_class = LocalService

    def __init__(self, cert_dir: str, store_root: str, **service_kw):
        self.cert_dir = cert_dir
        self.dirs = ca.local_tree(cert_dir)
        self.services = [self.service_class(r, self.dirs[r], os.path.join(store_root, r),
                                            **service_kw) for r in ca.SERVER_ROLES]

    def start(self) -> "LocalShareServices":
        try:
            for s in self.services:
                s.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stops both services: each is told (SIGTERM) before either is
        waited for, so their grace periods for open calls overlap."""
        for s in self.services:
            if s.proc is not None and s.proc.poll() is None:
                s.proc.send_signal(signal.SIGTERM)
        for s in self.services:
            s.stop()

    def __enter__(self) -> "LocalShareServices":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __getitem__(self, i: int) -> LocalService:
        return self.services[i]

    def __iter__(self):
        return iter(self.services)

    def owner_dir(self, owner: str) -> str:
        """Owner `owner`'s folder (its key, certificate and ca.pem)."""
        return os.path.join(self.dirs["owners"], ca.check_owner_name(owner))

    def cluster(self, owner: str, **kw) -> ServiceCluster:
        """The ServiceCluster of `owner`: its key made in its own folder and
        its certificate enrolled with S1 and S2, when missing."""
        paths = ca.local_owner(self.cert_dir, owner)
        return ServiceCluster(s1=self.services[0].address, s2=self.services[1].address,
                              ca=paths["ca"], cert=paths["cert"], key=paths["key"], **kw)

    def revoke(self, owner: str) -> None:
        """Revokes `owner` on both services (its enrolment removed from each)."""
        for s in self.services:
            ca.revoke(s.cert_dir, owner)


def concurrent_uploads(cluster: ServiceCluster, n: int = 50, share_bytes: int = 1 << 20,
                       prefix: str = "load", seed: int = 100, verify: bool = True) -> dict:
    """n clients (each its own TLS channels, one thread each) upload an array
    whose shares are share_bytes each, all at once; then (verify) each is
    fetched and compared. Returns {"uploads", "mib" (of shares sent),
    "seconds", "mib_per_s", "errors"}; raises AssertionError on a lost or
    mixed-up record."""
    per = share_bytes // (8 * (cluster.ring_bits // 64))
    arrays = {f"{prefix}-{i}": np.random.default_rng(seed + i).normal(size=per)
              for i in range(n)}
    errors: list = []
    barrier = threading.Barrier(n)

    def one(name):
        try:
            with ShareClient(cluster, timeout=300) as c:
                barrier.wait(120)
                c.upload(name, arrays[name], progress=False)
        except Exception as e:  # noqa: BLE001 - returned to the caller
            errors.append((name, repr(e)))
    threads = [threading.Thread(target=one, args=(name,)) for name in arrays]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    seconds = time.perf_counter() - t0
    if verify and not errors:
        from tf_privpy.deploy.service.client import decode, encode
        with ShareClient(cluster, timeout=300) as c:
            ring, frac, bound = c.ring_bits, c.frac_bits, c.bound
            for name, x in arrays.items():
                got = c.fetch(name)
                want = decode(encode(x, ring, frac, bound), ring, frac)
                if not np.array_equal(got, want):
                    raise AssertionError(f"{name} came back with other values")
    mib = n * 2 * share_bytes / 2**20
    return {"uploads": n, "mib": mib, "seconds": seconds, "mib_per_s": mib / seconds,
            "errors": errors}
