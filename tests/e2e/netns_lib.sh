# Two "nodes" on one machine for end-to-end tests (sourced, not a test): two network namespaces
# joined by a veth pair, NODE_A_IP=10.213.X.1 and NODE_B_IP=10.213.X.2 (/24), each with its own
# loopback. Everything lives inside the two namespaces the test creates: the veth is created
# directly inside them, so the host's interfaces and routes are never touched. Needs root and
# netns support; without them netns_setup says why in one line and exits 77 (skipped).
# Usage: netns_setup [PREFIX]     namespaces PREFIXa and PREFIXb (default prefix dtr<pid>);
#                                 exports NS_A, NS_B, NODE_A_IP, NODE_B_IP
#        netns_exec "$NS_A" cmd…  run cmd in a namespace
#        netns_teardown           safe from `trap … EXIT`, twice, or after a half-done setup
# One pair per process. X comes from the pid; pairs never see each other, so a clash is harmless.

NS_A="" NS_B="" NODE_A_IP="" NODE_B_IP=""
NETNS_OURS=()  # the namespaces this process created: the only ones netns_teardown deletes

netns_setup() {
  local prefix=${1:-dtr$$}
  local x=$(( $$ % 256 ))
  NS_A="${prefix}a" NS_B="${prefix}b"
  NODE_A_IP="10.213.$x.1" NODE_B_IP="10.213.$x.2"
  export NS_A NS_B NODE_A_IP NODE_B_IP
  command -v ip >/dev/null || netns__skip "no 'ip' command (iproute2)"
  netns__add "$NS_A"
  netns__add "$NS_B"
  netns__veth "vd$$a" "vd$$b"
  netns__up "$NS_A" "vd$$a" "$NODE_A_IP"
  netns__up "$NS_B" "vd$$b" "$NODE_B_IP"
  netns__wait_up "$NS_A" "vd$$a"
  netns__wait_up "$NS_B" "vd$$b"
}

netns_exec() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

netns_teardown() {
  local ns
  for ns in "${NETNS_OURS[@]}"; do
    netns__kill_inside "$ns"
    ip netns del "$ns" 2>/dev/null || true  # its end of the veth goes with it, and so the pair
  done
  NETNS_OURS=()
}

# --- helpers -------------------------------------------------------------------------------------

netns__skip() { echo "SKIP: $*"; netns_teardown; exit 77; }
netns__fail() { echo "FAIL: $*" >&2; netns_teardown; exit 1; }
netns__oneline() { tr '\n' ' ' | sed 's/ *$//'; }

# create one namespace; an existing name is someone else's (never adopted, never deleted)
netns__add() {
  local err
  if ip netns list 2>/dev/null | grep -q "^$1\( \|$\)"; then
    netns__fail "network namespace $1 already exists (left over? remove it: ip netns del $1)"
  fi
  err=$(ip netns add "$1" 2>&1) || netns__skip "cannot create network namespace $1 (needs root/CAP_SYS_ADMIN and netns support): $(netns__oneline <<<"$err")"
  NETNS_OURS+=("$1")
}

# the veth pair, born with one end in each namespace
netns__veth() {
  local err
  err=$(ip link add "$1" netns "$NS_A" type veth peer name "$2" netns "$NS_B" 2>&1) ||
    netns__skip "cannot create a veth pair (no veth support?): $(netns__oneline <<<"$err")"
}

# loopback up, address on the veth end, veth end up
netns__up() {
  local ns=$1 dev=$2 addr=$3 err
  err=$({ ip -n "$ns" link set lo up && ip -n "$ns" addr add "$addr/24" dev "$dev" &&
    ip -n "$ns" link set "$dev" up; } 2>&1) ||
    netns__fail "cannot configure $dev in $ns: $(netns__oneline <<<"$err")"
}

# the kernel reports carrier a moment after both ends are up (link watch): wait for it, up to 5 s
netns__wait_up() {
  local i
  for i in $(seq 50); do
    [ "$(ip -n "$1" -o link show dev "$2" 2>/dev/null | grep -o 'state [A-Z]*')" = "state UP" ] && return 0
    sleep 0.1
  done
  netns__fail "$2 in $1 did not come up: $(ip -n "$1" -o link show dev "$2" 2>&1)"
}

# processes still inside a namespace keep it (and the veth) alive after `ip netns del`: stop them
# (TERM, up to 2 s to go, then KILL); they can only be ones the test started there
netns__kill_inside() {
  local i
  netns__signal "$1" TERM || return 0
  for i in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.2
    [ -n "$(ip netns pids "$1" 2>/dev/null)" ] || return 0
  done
  netns__signal "$1" KILL || true
}
netns__signal() {  # false when no process is inside
  local pids
  pids=$(ip netns pids "$1" 2>/dev/null) && [ -n "$pids" ] || return 1
  kill "-$2" $pids 2>/dev/null || true
}
