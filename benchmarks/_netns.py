"""A five-machine test network on one Linux host, for benchmarks/distributed.py.

Each party (client, s1, s2, t1, t2) gets a network namespace of its own with
one veth interface, 10.77.0.<n>/24, plugged into a bridge that lives in a
sixth namespace (nothing is added to the host's own namespace). Each party's
uplink is shaped with `tc qdisc ... tbf` (its rate is the link's bandwidth).
This kernel has no netem, so a WAN's latency is added by a delaying TCP relay
(`relay` below) in the connecting party's namespace: every byte is held for
the one-way delay in each direction, so a connection sees RTT = 2 x delay.

    with Testbed(rate="352mbit", delay_ms=10) as tb:   # root; cleaned up always
        tb.popen("s1", [...])                             # a process in s1's namespace

Everything is removed on exit, on SIGINT / SIGTERM / SIGHUP, and namespaces
left by a run that was SIGKILLed are removed by the next one.

    python benchmarks/_netns.py relay --delay_ms 10 --map 127.0.0.1:7102=10.77.0.12:7102,...
    python benchmarks/_netns.py check        # set up, measure RTT and rate, tear down
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Dict, List, Mapping, Optional, Sequence

PREFIX = "tpnb"
SUBNET = "10.77.0"
#: last octet of each party's address
HOSTS = {"client": 10, "s1": 11, "s2": 12, "t1": 13, "t2": 14}


class NetnsUnavailable(Exception):
    """Namespaces cannot be made here (not root, no `ip`, a sandbox that forbids it)."""


def _ip(*args: str, ns: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise subprocess.CalledProcessError(r.returncode, cmd, r.stdout, r.stderr)
    return r


def unavailable_reason() -> Optional[str]:
    """None if this process can make namespaces, else why not."""
    if os.geteuid() != 0:
        return "not root (network namespaces need CAP_SYS_ADMIN)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"no `{tool}` (iproute2) on this machine"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> List[str]:
    """Deletes namespaces of earlier runs whose owner process is gone
    (tpnb<pid>-...): what a SIGKILLed run could not clean up."""
    r = _ip("ip", "netns", "list", check=False)
    removed = []
    for line in r.stdout.splitlines():
        ns = line.split()[0] if line.strip() else ""
        m = re.match(rf"{PREFIX}(\d+)-", ns)
        if m and not _alive(int(m.group(1))):
            _delete_namespace(ns)
            removed.append(ns)
    return removed


def _delete_namespace(ns: str) -> None:
    # processes still inside keep it alive after `ip netns del`: our own
    # (servers, relays, the driver) were started in it by this benchmark
    pids = _ip("ip", "netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    _ip("ip", "netns", "del", ns, check=False)


class Testbed:
    """Five namespaces on a bridge, each uplink shaped to `rate`.

    Args:
      rate: tc rate of every party's uplink ("40gbit", "352mbit").
      delay_ms: one-way delay each relay adds (0: no relays; connect directly).
      parties: who gets a namespace; name: tells testbeds of one process apart.
    """

    def __init__(self, rate: str, delay_ms: float = 0.0, parties: Sequence[str] = tuple(HOSTS),
                 name: str = ""):
        self.rate = rate
        self.delay_ms = float(delay_ms)
        self.parties = tuple(parties)
        # namespaces tpnb<pid>[-name]-<party>: a process can have several testbeds
        self.tag = f"{PREFIX}{os.getpid()}" + (f"-{name}" if name else "")
        self.switch = f"{self.tag}-sw"
        self.procs: List[subprocess.Popen] = []
        self._files = []
        self._old_handlers: Dict[int, object] = {}
        self.up = False

    # ---------------------------------------------------------------- names
    def ns(self, party: str) -> str:
        return f"{self.tag}-{party}"

    @staticmethod
    def address(party: str) -> str:
        return f"{SUBNET}.{HOSTS[party]}"

    # ----------------------------------------------------------- lifecycle
    def start(self) -> "Testbed":
        why = unavailable_reason()
        if why:
            raise NetnsUnavailable(why)
        remove_stale()
        self._install_handlers()
        try:
            self._build()
        except subprocess.CalledProcessError as e:
            self.stop()
            raise NetnsUnavailable(f"`{' '.join(e.cmd)}` failed: {e.stderr.strip()}") from None
        except BaseException:
            self.stop()
            raise
        self.up = True
        return self

    def _build(self) -> None:
        _ip("ip", "netns", "add", self.switch)
        _ip("ip", "link", "add", "br0", "type", "bridge", ns=self.switch)
        _ip("ip", "link", "set", "br0", "up", ns=self.switch)
        burst = _burst(self.rate)
        for party in self.parties:
            ns = self.ns(party)
            _ip("ip", "netns", "add", ns)
            _ip("ip", "link", "add", f"v-{party}", "netns", self.switch, "type", "veth",
                "peer", "name", "eth0", "netns", ns)
            _ip("ip", "link", "set", f"v-{party}", "master", "br0", "up", ns=self.switch)
            _ip("ip", "link", "set", "lo", "up", ns=ns)
            _ip("ip", "addr", "add", f"{self.address(party)}/24", "dev", "eth0", ns=ns)
            _ip("ip", "link", "set", "eth0", "up", ns=ns)
            # the party's uplink: a token bucket at the link rate, a queue of
            # up to 100 ms of it before drops (a router's buffer)
            _ip("tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", self.rate,
                "burst", burst, "latency", "100ms", ns=ns)

    def stop(self) -> None:
        """Stops every process started here, deletes every namespace.
        Safe to call twice and from a signal handler's unwinding."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.terminate()
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        for f in self._files:
            f.close()
        self._files = []
        for party in self.parties:
            _delete_namespace(self.ns(party))
        _delete_namespace(self.switch)
        self.up = False
        self._restore_handlers()

    def __enter__(self) -> "Testbed":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _install_handlers(self) -> None:
        def on_signal(signum, _frame):
            raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, on_signal)

    def _restore_handlers(self) -> None:
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        self._old_handlers = {}

    # ------------------------------------------------------------ processes
    def popen(self, party: str, argv: Sequence[str], log: Optional[str] = None,
              env: Optional[Mapping[str, str]] = None, **kwargs) -> subprocess.Popen:
        """Starts argv inside the party's namespace (`ip netns exec` execs it:
        the pid is argv's). Output goes to log.out / log.err when given."""
        if log:
            out, err = open(log + ".out", "wb"), open(log + ".err", "wb")
            self._files += [out, err]
            kwargs.update(stdout=out, stderr=err)
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(party), *argv],
                             env=dict(env) if env is not None else None,
                             start_new_session=True, **kwargs)
        self.procs.append(p)
        return p

    def start_relays(self, ports: Mapping[str, int], log_dir: str) -> None:
        """In every namespace, 127.0.0.1:<port of each other party> forwards to
        that party's address with the one-way delay each way."""
        for party in self.parties:
            pairs = ",".join(f"127.0.0.1:{ports[o]}={self.address(o)}:{ports[o]}"
                             for o in self.parties if o != party)
            self.popen(party, [sys.executable, os.path.abspath(__file__), "relay",
                               "--delay_ms", str(self.delay_ms), "--map", pairs],
                       log=os.path.join(log_dir, f"relay-{party}"))
        for party in self.parties:
            for o in self.parties:
                if o != party:
                    self.wait_port(party, "127.0.0.1", ports[o])

    def calibrate(self, rtt_ms: float, tries: int = 3, within_ms: float = 1.0) -> float:
        """Adjusts the relays' one-way delay until a connection through one
        measures rtt_ms (within within_ms; the relay's scheduling adds a
        little); returns the RTT last measured."""
        self.delay_ms = rtt_ms / 2
        for _ in range(tries):
            # the median of three: a loaded machine delays single wake-ups
            got = sorted(self.measure(self.parties[0], self.parties[1], via_relay=True,
                                      nbytes=0)["rtt_ms"] for _ in range(3))[1]
            if abs(got - rtt_ms) <= within_ms:
                break
            self.delay_ms = max(0.0, self.delay_ms - (got - rtt_ms) / 2)
        return got

    def wait_port(self, party: str, host: str, port: int, timeout: float = 30.0) -> None:
        """Waits until something listens on host:port inside the party's namespace."""
        deadline = time.monotonic() + timeout
        while True:
            r = _ip("ss", "-ltnH", f"src {host}:{port}", ns=self.ns(party), check=False)
            if r.stdout.strip():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing listens on {host}:{port} in {self.ns(party)}")
            time.sleep(0.1)

    def measure(self, src: str, dst: str, port: int = 7199, via_relay: bool = False,
                nbytes: int = 20 << 20) -> Dict[str, float]:
        """RTT (median of 40 one-byte round trips) and one-way throughput
        (nbytes; 0: not measured) from src to dst over the testbed, with
        Python sockets (this module's `sink` / `probe`), through a relay with
        this testbed's delay when via_relay."""
        sink = self.popen(dst, [sys.executable, os.path.abspath(__file__), "sink",
                                "--port", str(port)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
        try:
            self.wait_port(dst, "0.0.0.0", port)
            relay = []
            if via_relay:
                rport = port + 1
                relay.append(self.popen(src, [
                    sys.executable, os.path.abspath(__file__), "relay", "--delay_ms",
                    str(self.delay_ms), "--map", f"127.0.0.1:{rport}={self.address(dst)}:{port}"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                self.wait_port(src, "127.0.0.1", rport)
                target = f"127.0.0.1:{rport}"
            else:
                target = f"{self.address(dst)}:{port}"
            r = _ip(sys.executable, os.path.abspath(__file__), "probe", "--target", target,
                    "--bytes", str(nbytes), ns=self.ns(src))
            vals = dict(kv.split("=") for kv in r.stdout.split())
            for p in relay:
                p.terminate()
                p.wait()
            return {k: float(v) for k, v in vals.items()}
        finally:
            sink.terminate()
            sink.wait()


def rate_bps(rate: str) -> float:
    """A tc rate ("352mbit", "40gbit") in bits per second."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", rate)
    if not m:
        raise ValueError(f"rate must look like 352mbit or 40gbit, got {rate!r}")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def _burst(rate: str) -> str:
    """tbf's bucket: at least 64 KB (a GSO segment), else 1 ms at the rate."""
    return str(max(65536, int(rate_bps(rate) / 8 / 1000)))


# ---------------------------------------------------------------- the relay
async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copies reader to writer, each chunk written `delay` s after it arrived."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue(maxsize=64)  # backpressure: 64 chunks in flight

    async def pump_in():
        while True:
            data = await reader.read(1 << 18)
            await queue.put((loop.time() + delay, data))
            if not data:
                return

    async def pump_out():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    try:
        await asyncio.gather(pump_in(), pump_out())
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _relay(mapping: Mapping[tuple, tuple], delay: float) -> None:
    async def handle(target, r1, w1):
        try:
            r2, w2 = await asyncio.open_connection(*target)
        except OSError:
            w1.close()
            return
        await asyncio.gather(_pipe(r1, w2, delay), _pipe(r2, w1, delay))

    servers = []
    for (host, port), target in mapping.items():
        servers.append(await asyncio.start_server(
            lambda r, w, t=target: handle(t, r, w), host, port, reuse_address=True))
    print("relay ready", flush=True)
    parent = os.getppid()
    while os.getppid() == parent:  # ends with the benchmark that started it
        await asyncio.sleep(0.5)


def _hostport(s: str) -> tuple:
    host, _, port = s.rpartition(":")
    return host, int(port)


# ------------------------------------------------ sink and probe (measure)
def _sink(port: int) -> None:
    srv = socket.create_server(("0.0.0.0", port), reuse_port=True)
    while True:
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                head = conn.recv(1)
                if not head:
                    break
                if head == b"p":          # ping: answer one byte
                    conn.sendall(b"p")
                elif head == b"b":        # bulk: read 8-byte length, then that many bytes
                    n = int.from_bytes(_recv_exact(conn, 8), "big")
                    _recv_exact(conn, n, keep=False)
                    conn.sendall(b"d")


def _recv_exact(conn: socket.socket, n: int, keep: bool = True) -> bytes:
    parts, got = [], 0
    while got < n:
        b = conn.recv(min(1 << 20, n - got))
        if not b:
            raise ConnectionError("peer closed")
        got += len(b)
        if keep:
            parts.append(b)
    return b"".join(parts)


def _probe(target: str, nbytes: int) -> None:
    s = socket.create_connection(_hostport(target))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(40):
        t = time.perf_counter()
        s.sendall(b"p")
        _recv_exact(s, 1)
        rtts.append(time.perf_counter() - t)
    rtts.sort()
    rtt_ms = 1e3 * rtts[len(rtts) // 2]
    if not nbytes:
        print(f"rtt_ms={rtt_ms:.4f}")
        return
    buf = b"\0" * (1 << 20)
    t = time.perf_counter()
    s.sendall(b"b" + nbytes.to_bytes(8, "big"))
    left = nbytes
    while left:
        left -= s.send(buf[:min(len(buf), left)])
    _recv_exact(s, 1)
    dt = time.perf_counter() - t
    print(f"rtt_ms={rtt_ms:.4f} mbit_s={nbytes * 8 / dt / 1e6:.1f}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("relay")
    r.add_argument("--delay_ms", type=float, required=True)
    r.add_argument("--map", required=True, help="listen=target,... (host:port each)")
    s = sub.add_parser("sink")
    s.add_argument("--port", type=int, required=True)
    p = sub.add_parser("probe")
    p.add_argument("--target", required=True)
    p.add_argument("--bytes", type=int, default=20 << 20)
    c = sub.add_parser("check")
    c.add_argument("--rate", default="352mbit")
    c.add_argument("--delay_ms", type=float, default=10.0)
    a = ap.parse_args(argv)
    if a.cmd == "relay":
        mapping = {}
        for item in a.map.split(","):
            listen, _, target = item.partition("=")
            mapping[_hostport(listen)] = _hostport(target)
        asyncio.run(_relay(mapping, a.delay_ms / 1e3))
    elif a.cmd == "sink":
        _sink(a.port)
    elif a.cmd == "probe":
        _probe(a.target, a.bytes)
    else:
        with Testbed(a.rate, a.delay_ms, parties=("client", "s1")) as tb:
            print("direct:", tb.measure("client", "s1"))
            if a.delay_ms:
                print("via relay:", tb.measure("client", "s1", via_relay=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
