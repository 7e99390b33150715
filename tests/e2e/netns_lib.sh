# Two "nodes" on one machine for end-to-end tests (sourced): two network namespaces joined by a
# veth pair, 10.213.X.1 and 10.213.X.2, created and removed by the test itself. Needs root and
# netns support; without them, says why and exits 77 (skipped).
# Usage: netns_setup; netns_exec "$NS_A" cmd…; netns_teardown (safe to call from a trap).
NS_A="" NS_B=""
netns_setup() {
  local id=$(( $$ % 250 + 1 ))
  NS_A="dtra$$" NS_B="dtrb$$"
  NODE_A_IP="10.213.$id.1" NODE_B_IP="10.213.$id.2"
  local va="vda$$" vb="vdb$$"
  if ! ip netns add "$NS_A" 2>/dev/null; then
    echo "SKIP: cannot create network namespaces here (needs root and netns support)"
    NS_A=""
    exit 77
  fi
  ip netns add "$NS_B"
  ip link add "$va" type veth peer name "$vb"
  ip link set "$va" netns "$NS_A"
  ip link set "$vb" netns "$NS_B"
  ip -n "$NS_A" addr add "$NODE_A_IP/24" dev "$va"
  ip -n "$NS_B" addr add "$NODE_B_IP/24" dev "$vb"
  for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
  ip -n "$NS_A" link set "$va" up
  ip -n "$NS_B" link set "$vb" up
  export NS_A NS_B NODE_A_IP NODE_B_IP
}
netns_exec() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
netns_teardown() {
  # removing a namespace removes its end of the veth, and with it the pair
  [ -z "$NS_A" ] || ip netns del "$NS_A" 2>/dev/null || true
  [ -z "$NS_B" ] || ip netns del "$NS_B" 2>/dev/null || true
}
