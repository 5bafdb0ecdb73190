"""Test fixtures: a real 3-member raftkv cluster from scripts/cluster.sh.

Environment:
  RAFTKV_BIN_DIR     where raftkv-server and raftkvctl are (default <repo>/build;
                     when it is set and they are missing, the cluster tests fail,
                     otherwise they are skipped)
  RAFTKV_DATA        the cluster directory (default: a new temporary one)
  RAFTKV_BASE_PORT   member I listens on 127.0.0.1:BASE+I (default 30000 + pid % 20000)
  RAFTKV_SERVER_FLAGS  extra server flags, added to the tests' own
  RAFTKV_REPO        the repository (default: two levels above this package)
"""

import os
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.environ.get("RAFTKV_REPO") or os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CLUSTER_SH = os.path.join(REPO, "scripts", "cluster.sh")

# Members keep few revisions of history, so that a test can outrun the window
# (errors.Compacted) with a few hundred writes.
HISTORY_REVISIONS = 150
SERVER_FLAGS = "--history_revisions=%d" % HISTORY_REVISIONS


class Cluster:
    """A running cluster.sh cluster: endpoints, kill/restart of member I (1-based)."""

    def __init__(self, bin_dir, data, base_port, n=3):
        self.bin_dir = bin_dir
        self.data = data
        self.base_port = base_port
        self.n = n
        self.endpoints = []
        self.killed = set()
        self.env = dict(os.environ, RAFTKV_BIN_DIR=bin_dir, RAFTKV_DATA=data,
                        RAFTKV_BASE_PORT=str(base_port),
                        RAFTKV_SERVER_FLAGS=(SERVER_FLAGS + " " +
                                             os.environ.get("RAFTKV_SERVER_FLAGS", "")).strip())

    def _sh(self, *args, check=True, timeout=60):
        p = subprocess.run(["bash", CLUSTER_SH] + [str(a) for a in args], env=self.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            raise RuntimeError("cluster.sh %s failed (%d):\n%s%s" % (
                " ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
        return p

    def start(self):
        p = self._sh("start", self.n)
        for line in p.stdout.splitlines():
            if line.startswith("ENDPOINTS="):
                self.endpoints = line[len("ENDPOINTS="):].split(",")
        if len(self.endpoints) != self.n:
            raise RuntimeError("cluster.sh start printed no ENDPOINTS line:\n%s%s" % (p.stdout, p.stderr))

    def stop(self):
        self._sh("stop", check=False)

    def index_of(self, endpoint):
        """Member number (1-based) of an endpoint."""
        return int(endpoint.rsplit(":", 1)[1]) - self.base_port

    def endpoint_of(self, i):
        return self.endpoints[i - 1]

    def kill(self, i):
        self._sh("kill", i)
        self.killed.add(i)

    def restart(self, i):
        self._sh("restart", i)
        self.killed.discard(i)

    def heal(self):
        """Restarts every killed member."""
        for i in sorted(self.killed):
            self.restart(i)

    def server_log_tail(self, i, lines=20):
        try:
            with open(os.path.join(self.data, "node%d" % i, "server.out"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


def _bin_dir():
    return os.path.abspath(os.environ.get("RAFTKV_BIN_DIR") or os.path.join(REPO, "build"))


@pytest.fixture(scope="session")
def cluster():
    bin_dir = _bin_dir()
    missing = [b for b in ("raftkv-server", "raftkvctl")
               if not os.access(os.path.join(bin_dir, b), os.X_OK)]
    if missing:
        msg = "%s not found in %s (set RAFTKV_BIN_DIR to the build directory)" % (
            " and ".join(missing), bin_dir)
        if os.environ.get("RAFTKV_BIN_DIR"):
            pytest.fail(msg)
        pytest.skip(msg)
    own_data = not os.environ.get("RAFTKV_DATA")
    data = os.environ.get("RAFTKV_DATA") or tempfile.mkdtemp(prefix="raftkv-pytest.")
    base_port = int(os.environ.get("RAFTKV_BASE_PORT") or 30000 + os.getpid() % 20000)
    c = Cluster(bin_dir, data, base_port)
    c.start()
    try:
        yield c
    finally:
        c.stop()
        if own_data:
            shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def healthy(cluster):
    """The cluster, with every member running before and after the test."""
    cluster.heal()
    yield cluster
    cluster.heal()


@pytest.fixture
def client(cluster):
    import raftkv
    with raftkv.Client(cluster.endpoints, timeout=10.0) as c:
        yield c


@pytest.fixture
def prefix():
    """A key prefix of the test's own."""
    return "t-%s/" % uuid.uuid4().hex[:10]


def wait_until(predicate, timeout=10.0, interval=0.05, what="condition"):
    end = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() >= end:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)
