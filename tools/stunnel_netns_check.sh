#!/usr/bin/env bash
# Checks the stunnel set-up of docs/distributed.md ("Authenticated tunnels") on one machine:
# five network namespaces stand for the five machines (driver, S1, S2, T1, T2). Each has
# only its own loopback interface, so nothing in one can reach another by TCP/IP at all;
# the only way between them is a Unix socket per machine in a shared folder (the "wire"),
# on which only that machine's stunnel listens, with mutual TLS 1.3 and pinned
# certificates. The cluster file gives every task a 127.0.0.1 address; on each machine,
# its stunnel clients listen on the other machines' ports and forward, through TLS, to
# their owners. Exactly the deployment of the doc, with the wire as the network.
#
# What it checks: the four servers start (each with its own folder, identity key and copy
# of the cluster file); the driver's tp.init runs the key exchange through the tunnels;
# a private multiplication and a checkpoint (save, new runtime, restore) give the right
# values; a client without a certificate, and one with a certificate nobody pinned, are
# refused by a server's stunnel; and with the tunnels stopped nothing connects.
#
# Needs root (ip netns), stunnel4, openssl. Sends no traffic outside this machine: the
# namespaces have no interface but lo. Run from the repository root:
#   bash tools/stunnel_netns_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-$ROOT/.venv/bin/python}
WORK=$(mktemp -d /tmp/tp_stunnel.XXXXXX)
chmod 755 "$WORK"
WIRE=$WORK/wire
mkdir -p "$WIRE"
MACHINES=(driver s1 s2 t1 t2)
declare -A PORT=([driver]=7100 [s1]=7101 [s2]=7102 [t1]=7103 [t2]=7104)
NS=tpst
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for m in "${MACHINES[@]}"; do
    ip netns pids "$NS-$m" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$NS-$m" 2>/dev/null || true
  done
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

say() { echo "[stunnel check] $*"; }
in_ns() { local m=$1; shift; ip netns exec "$NS-$m" "$@"; }

# --- five "machines": a namespace with only loopback, and a folder each -------------
for m in "${MACHINES[@]}"; do
  ip netns add "$NS-$m"
  in_ns "$m" ip link set lo up
  mkdir -p "$WORK/$m/tunnel"
  chmod 700 "$WORK/$m"
done

# --- on each machine: its own TLS key and self-signed certificate (the key never leaves)
for m in "${MACHINES[@]}"; do
  openssl req -x509 -newkey ed25519 -nodes -days 825 -subj "/CN=tf_privpy-$m" \
    -keyout "$WORK/$m/tunnel/$m.key" -out "$WORK/$m/tunnel/$m.pem" 2>/dev/null
  chmod 600 "$WORK/$m/tunnel/$m.key"
done
# ... and the others' certificates (public), copied to it: peers.pem pins the four others
for m in "${MACHINES[@]}"; do
  : > "$WORK/$m/tunnel/peers.pem"
  for o in "${MACHINES[@]}"; do
    [ "$o" = "$m" ] && continue
    cp "$WORK/$o/tunnel/$o.pem" "$WORK/$m/tunnel/$o.pem"
    cat "$WORK/$o/tunnel/$o.pem" >> "$WORK/$m/tunnel/peers.pem"
  done
done

# --- stunnel on each machine: one server (the wire -> its own TF port), one client per
#     other machine (127.0.0.1:THEIR_PORT -> their wire socket)
for m in "${MACHINES[@]}"; do
  conf=$WORK/$m/tunnel/stunnel.conf
  {
    echo "foreground = yes"
    echo "pid ="
    echo "debug = notice"
    echo
    echo "[in]"
    echo "accept = $WIRE/$m.sock"
    echo "connect = 127.0.0.1:${PORT[$m]}"
    echo "cert = $WORK/$m/tunnel/$m.pem"
    echo "key = $WORK/$m/tunnel/$m.key"
    echo "CAfile = $WORK/$m/tunnel/peers.pem"
    echo "verifyPeer = yes"
    echo "sslVersionMin = TLSv1.3"
    for o in "${MACHINES[@]}"; do
      [ "$o" = "$m" ] && continue
      echo
      echo "[to-$o]"
      echo "client = yes"
      echo "accept = 127.0.0.1:${PORT[$o]}"
      echo "connect = $WIRE/$o.sock"
      echo "cert = $WORK/$m/tunnel/$m.pem"
      echo "key = $WORK/$m/tunnel/$m.key"
      echo "CAfile = $WORK/$m/tunnel/$o.pem"
      echo "verifyPeer = yes"
      echo "sslVersionMin = TLSv1.3"
    done
  } > "$conf"
  # not through in_ns: $! must be stunnel itself (ip netns exec execs it)
  ip netns exec "$NS-$m" stunnel "$conf" > "$WORK/$m/tunnel/stunnel.log" 2>&1 &
  PIDS+=($!)
done
sleep 2
for m in "${MACHINES[@]}"; do
  [ -S "$WIRE/$m.sock" ] || { say "FAIL: stunnel of $m did not start"; cat "$WORK/$m/tunnel/stunnel.log"; exit 1; }
done
say "five stunnels up (mutual TLS 1.3, pinned certificates)"

# --- identity keys on each server machine, then one cluster file copied everywhere ------
export PYTHONPATH=$ROOT TF_CPP_MIN_LOG_LEVEL=3
declare -A PUB
for r in s1 s2 t1 t2; do
  PUB[$r]=$("$PY" -m tf_privpy.cluster keygen --out "$WORK/$r/$r.key" | tail -1)
done
"$PY" -m tf_privpy.cluster new --out "$WORK/driver/cluster.json" --timeout_s 20 \
  --s1 127.0.0.1:7101 --s2 127.0.0.1:7102 --t1 127.0.0.1:7103 --t2 127.0.0.1:7104 \
  --client 127.0.0.1:7100 --s1_key "${PUB[s1]}" --s2_key "${PUB[s2]}" \
  --t1_key "${PUB[t1]}" --t2_key "${PUB[t2]}" > /dev/null
for r in s1 s2 t1 t2; do cp "$WORK/driver/cluster.json" "$WORK/$r/cluster.json"; done
say "cluster file sha256 $(sha256sum "$WORK/driver/cluster.json" | cut -c1-64)"

# --- the four servers, each in its namespace with its own folder -----------------------
for r in s1 s2 t1 t2; do
  ip netns exec "$NS-$r" "$PY" -m tf_privpy.server --role "$r" --cluster "$WORK/$r/cluster.json" \
    > "$WORK/$r/server.out" 2> "$WORK/$r/server.err" &
  PIDS+=($!)
done
for r in s1 s2 t1 t2; do
  for _ in $(seq 240); do grep -q "ready on" "$WORK/$r/server.out" 2>/dev/null && break; sleep 0.5; done
  grep "ready on" "$WORK/$r/server.out" || { say "FAIL: $r did not start"; tail "$WORK/$r/server.err"; exit 1; }
done

# --- a stranger: no certificate, then a certificate nobody pinned ----------------------
openssl req -x509 -newkey ed25519 -nodes -days 1 -subj "/CN=stranger" \
  -keyout "$WORK/stranger.key" -out "$WORK/stranger.pem" 2>/dev/null
for how in "" "-cert $WORK/stranger.pem -key $WORK/stranger.key"; do
  # shellcheck disable=SC2086
  echo | timeout 10 openssl s_client -unix "$WIRE/s1.sock" -tls1_3 $how \
    -CAfile "$WORK/driver/tunnel/s1.pem" > /dev/null 2>&1 || true
done
sleep 0.5
grep -q "peer did not return a certificate" "$WORK/s1/tunnel/stunnel.log" \
  && grep -q "Rejected by CERT at depth=0: CN=stranger" "$WORK/s1/tunnel/stunnel.log" \
  || { say "FAIL: S1's stunnel did not refuse the strangers"; exit 1; }
say "a client without a certificate and one with an unpinned certificate: refused by S1's stunnel"
sha=$(sha256sum "$WORK/driver/cluster.json" | cut -c1-64)
for r in s1 s2 t1 t2; do
  grep -q "cluster file sha256 $sha)" "$WORK/$r/server.out" \
    || { say "FAIL: $r's ready line does not show the cluster file's sha256"; exit 1; }
done

# --- the driver, in its namespace: tp.init, a product, a checkpoint --------------------
in_ns driver "$PY" - "$WORK/driver/cluster.json" "$WORK/ckpt" <<'EOF'
import sys, numpy as np, tensorflow as tf
import tf_privpy as tp
path, root = sys.argv[1], sys.argv[2]
tp.init(cluster=path)
x, y = np.array([1.5, -2.0, 3.25]), np.array([0.5, 4.0, -1.0])
got = tp.reveal(tp.share(x) * tp.share(y)).numpy()
assert np.allclose(got, x * y, atol=1e-5), got
w = tp.Variable(tp.share(x), name="w")
tp.save_variables([w], root)
tp.reset(); tp.init(cluster=path)           # a new runtime: new keys
fresh = tp.Variable(np.zeros(3), name="w")
tp.restore_variables([fresh], root)
assert np.allclose(fresh.reveal().numpy(), x, atol=1e-6)
print("[stunnel check] driver: tp.init through the tunnels, x*y =", got.tolist(),
      "; checkpoint restored in a new runtime")
EOF
conns=$(grep -c "accepted connection" "$WORK"/*/tunnel/stunnel.log | awk -F: '{s+=$2} END {print s}')
say "TLS connections accepted by the five stunnels: $conns"

# --- without the tunnels nothing connects -----------------------------------------------
for p in "${PIDS[@]:0:5}"; do kill "$p"; done
for p in "${PIDS[@]:0:5}"; do wait "$p" 2>/dev/null || true; done
if in_ns driver timeout 20 "$PY" -c "
from tf_privpy.deploy import cluster_file as cf
import sys
p = cf.probe('s1', '127.0.0.1:7101', 5.0)
sys.exit(0 if p.ok else 1)" 2>/dev/null; then
  say "FAIL: S1 answered the driver with the tunnels stopped"; exit 1
fi
say "with the stunnels stopped the driver cannot reach S1 (nothing but the tunnels joins the namespaces)"
say "OK"
