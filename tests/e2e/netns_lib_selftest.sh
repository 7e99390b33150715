#!/usr/bin/env bash
# Self-test of netns_lib.sh (not run by ctest): sets up the two namespaces, exchanges one line over
# TCP from b to a listener on NODE_A_IP in a, shows each namespace's 127.0.0.1 is its own, reports
# what `hostname` and `getent hosts $(hostname)` give inside a namespace, checks the host's links
# and routes are untouched, and that setup cleans up after itself when it fails halfway, skips
# (77) without privileges, and leaves no namespace or veth behind.
# Usage: tests/e2e/netns_lib_selftest.sh   (as root; exit 77 when namespaces cannot be made)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib=$here/netns_lib.sh
source "$lib"
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }
tmp=$(mktemp -d)
trap 'netns_teardown; ip netns del "nsh$$b" 2>/dev/null || true; rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

host_net() { { ip -br link; ip -br addr; ip route; ip -6 route; } 2>&1 | sed 's/ \+/ /g'; }

# listen on HOST:PORT in namespace NS, answer one line with "TAG: <line>", report the peer's
# address; backgrounded, ready once $tmp/TAG.ready exists
listen_once() {
  local ns=$1 host=$2 port=$3 tag=$4
  netns_exec "$ns" "$py" -c '
import socket, sys
host, port, tag, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port)); s.listen(1); s.settimeout(15)
open(ready, "w").close()
c, peer = s.accept()
line = c.makefile().readline().strip()
c.sendall(f"{tag}: {line}\n".encode())
print(f"{tag} listener on {host}:{port} got {line!r} from {peer[0]}")
' "$host" "$port" "$tag" "$tmp/$tag.ready" >"$tmp/$tag.out" 2>&1 &
}
wait_ready() {
  local i
  for i in $(seq 50); do [ -e "$tmp/$1.ready" ] && return 0; sleep 0.1; done
  cat "$tmp/$1.out"; fail "listener $1 did not start"
}
# from namespace NS, send one line to HOST:PORT with bash's /dev/tcp and print the answer
send_line() {
  netns_exec "$1" timeout 5 bash -c 'exec 3<>"/dev/tcp/$0/$1" && echo "$2" >&3 && read -r r <&3 && echo "$r"' \
    "$2" "$3" "$4"
}

check_privileges_needed() {  # as nobody, netns_setup must skip with one line
  local out rc=0
  command -v setpriv >/dev/null || { echo "note: no setpriv, unprivileged skip not checked"; return; }
  out=$({ cat "$lib"; echo "netns_setup nsu$$"; } |
    setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all bash -s 2>&1) || rc=$?
  [ "$rc" = 77 ] && [ "$(wc -l <<<"$out")" = 1 ] && [[ $out == SKIP:* ]] ||
    fail "unprivileged setup should print one SKIP line and exit 77, got rc=$rc: $out"
  ok "unprivileged: exit 77 with: $out"
}

check_half_setup_cleans_up() {  # b exists already: setup fails, removes its a, leaves b alone
  local out rc=0
  ip netns add "nsh$$b"
  out=$(bash -c 'source "$0"; netns_setup "nsh$1"' "$lib" "$$" 2>&1) || rc=$?
  [ "$rc" = 1 ] || fail "setup onto an existing namespace should fail, got rc=$rc: $out"
  ! ip netns list | grep -q "^nsh$$a\b" || fail "half-done setup left nsh$$a behind"
  ip netns list | grep -q "^nsh$$b\b" || fail "half-done setup deleted a namespace it did not create"
  ip netns del "nsh$$b"
  ok "half-done setup cleaned up after itself: $out"
}

check_link() {  # one line from b to a listener on NODE_A_IP in a
  local reply
  listen_once "$NS_A" "$NODE_A_IP" 29500 link; wait_ready link
  reply=$(send_line "$NS_B" "$NODE_A_IP" 29500 "hello from b") || fail "b could not reach $NODE_A_IP:29500"
  wait
  [ "$reply" = "link: hello from b" ] || fail "unexpected reply: $reply"
  grep -q "from $NODE_B_IP\$" "$tmp/link.out" || { cat "$tmp/link.out"; fail "peer is not $NODE_B_IP"; }
  ok "b -> $NODE_A_IP:29500: reply '$reply'; $(cat "$tmp/link.out")"
}

check_own_loopback() {  # both bind 127.0.0.1:29501; b reaches only its own
  local reply
  listen_once "$NS_A" 127.0.0.1 29501 lo_a; listen_once "$NS_B" 127.0.0.1 29501 lo_b
  wait_ready lo_a; wait_ready lo_b
  reply=$(send_line "$NS_B" 127.0.0.1 29501 "b to 127.0.0.1") || fail "b could not reach its own 127.0.0.1"
  [ "$reply" = "lo_b: b to 127.0.0.1" ] || fail "b's 127.0.0.1 answered: $reply"
  ! send_line "$NS_B" 127.0.0.1 29501 "again" 2>/dev/null || fail "b reached a's 127.0.0.1 listener"
  reply=$(send_line "$NS_A" 127.0.0.1 29501 "a to 127.0.0.1") || fail "a's 127.0.0.1 listener was gone"
  [ "$reply" = "lo_a: a to 127.0.0.1" ] || fail "a's 127.0.0.1 answered: $reply"
  wait
  ok "a and b both listen on 127.0.0.1:29501; b gets its own ('lo_b'), then is refused while a's still listens"
}

report_hostname() {  # what a program looking for its own address finds inside b
  local h hb
  h=$(hostname); hb=$(netns_exec "$NS_B" hostname)
  [ "$h" = "$hb" ] || fail "hostname differs inside the namespace: $hb vs $h"
  echo "finding: hostname inside $NS_B prints '$hb' (same as the host: the UTS namespace is shared)"
  echo "finding: getent hosts $hb inside $NS_B -> '$(netns_exec "$NS_B" getent hosts "$hb" | netns__oneline || echo "<nothing>")'"
  echo "finding: python gethostbyname(gethostname()) inside $NS_B -> $(netns_exec "$NS_B" "$py" -c \
    'import socket; print(socket.gethostbyname(socket.gethostname()))' 2>&1)"
  echo "finding: addresses in $NS_B: $(ip -n "$NS_B" -br addr | netns__oneline)"
  local via
  via=$(netns_exec "$NS_B" "$py" -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect((sys.argv[1], 29400))
print(s.getsockname()[0])' "$NODE_A_IP")  # a UDP connect sends nothing, it only picks the route
  [ "$via" = "$NODE_B_IP" ] || fail "route from b to $NODE_A_IP uses $via"
  echo "finding: the local address b uses to reach $NODE_A_IP is $via (= NODE_B_IP)"
}

check_privileges_needed
check_half_setup_cleans_up
before=$(host_net)
netns_setup "nst$$"
echo "setup: $NS_A=$NODE_A_IP $NS_B=$NODE_B_IP"
[ "$(host_net)" = "$before" ] || { diff <(echo "$before") <(host_net); fail "the host's links/routes changed"; }
ok "host links, addresses and routes unchanged while the namespaces exist"
check_link
check_own_loopback
report_hostname
netns_teardown
netns_teardown  # twice is fine
! ip netns list | grep -q "^nst$$[ab]\b" || fail "namespaces left: $(ip netns list)"
! ip -br link | grep -q "vd$$" || fail "veth left on the host"
[ "$(host_net)" = "$before" ] || { diff <(echo "$before") <(host_net); fail "the host's links/routes changed"; }
ok "teardown removed both namespaces; host links and routes as before"
echo "PASS: netns_lib selftest"
