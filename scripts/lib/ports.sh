# shellcheck shell=bash
# Sourced by the script tests: free_base_port SPAN prints a base port B such
# that B+1 .. B+SPAN are all free on 127.0.0.1 (free_port: one free port).
# Like the C++ tests' PickFreePorts, it searches below the Linux ephemeral
# range (32768..60999), where outgoing connections of parallel tests take
# their local ports, from a random start.
free_base_port() {
  python3 - "$1" <<'PY'
import random, socket, sys
span = int(sys.argv[1])
low, high = 20000, 32000 - span
def free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()
for _ in range(200):
    base = random.randrange(low, high)
    if all(free(base + i) for i in range(1, span + 1)):
        print(base)
        sys.exit(0)
sys.exit("no %d free consecutive ports in %d..%d" % (span, low, high + span))
PY
}

free_port() {
  local base
  base=$(free_base_port 1) || return
  echo $((base + 1))
}
