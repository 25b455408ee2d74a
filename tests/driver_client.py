"""The test process's end of tests/distributed_driver.py: the driver runs in
a process of its own (TF 2.14 cannot connect a process to a cluster and come
back), takes one JSON command per line on stdin and answers with a REPLY line.
Used by tests/test_distributed.py's fixtures (and through them by
test_distributed_models.py)."""
import json
import os
import queue
import subprocess
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _env():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


class Driver:
    """tests/distributed_driver.py as a subprocess: one JSON command per call."""

    def __init__(self, log_path):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "distributed_driver.py")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
            env=_env())
        self.replies = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self._ready = False

    def wait_ready(self):
        """Waits for the driver's ready line (its imports done): launching it
        first lets its TensorFlow import overlap the servers' starts."""
        if not self._ready:
            assert self._reply(120).get("ready")
            self._ready = True

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("REPLY "):
                self.replies.put(json.loads(line[len("REPLY "):]))
        self.replies.put({"error": "driver exited", "message": self.stderr_tail()})

    def stderr_tail(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return "".join(f.readlines()[-30:])

    def _reply(self, timeout):
        try:
            return self.replies.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the driver did not answer within {timeout} s:\n{self.stderr_tail()}")

    def send(self, cmd, **kwargs):
        """Starts command `cmd` with kwargs; receive() waits for its reply
        (meanwhile this process can run the embedded side of a comparison)."""
        self.wait_ready()
        self.proc.stdin.write(json.dumps(dict(cmd=cmd, **kwargs)) + "\n")
        self.proc.stdin.flush()

    def receive(self, wait=180):
        """The reply to the command sent last; `wait`: seconds to wait."""
        reply = self._reply(wait)
        assert not reply.get("unexpected"), reply
        return reply

    def call(self, cmd, wait=180, **kwargs):
        """Runs command `cmd` with kwargs; `wait`: seconds to wait for the reply."""
        self.send(cmd, **kwargs)
        return self.receive(wait)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write('{"cmd": "exit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.reader.join(10)  # it reads the log once the driver's stdout ends
        self.log.close()


def connect(driver, cluster, stale_roles, timeout):
    """tp.init in `driver` on the session's `cluster` (conftest.shared_cluster),
    after restarting the servers an earlier test left running another way
    (stale_roles); returns init's reply."""
    for role in sorted(stale_roles):
        cluster.restart(role)
    stale_roles.clear()
    return driver.call("init", cluster=cluster.path, timeout=timeout)
