#!/bin/sh
# netns.sh: a simulated cluster on one machine. N network namespaces ("nodes") joined by veth pairs to a
# bridge that lives in a namespace of its own; each node's egress goes through a tbf qdisc (default
# 1 Gbit/s; this kernel has no netem, so no delay is added). Inside a node, ranks talk over shared memory
# as on a real node; between nodes every byte crosses the node's rate-limited veth. Nothing is created in
# the root namespace, and traffic only goes to addresses inside the namespaces made here.
#
#   netns.sh up N [--rate 1gbit] [--burst 128kb] [--name NAME]   create; prints the cluster's NAME
#   netns.sh down NAME                 kill what runs in its nodes, delete its namespaces
#   netns.sh exec NAME NODE CMD...     run CMD inside node NODE (0..N-1)
#   netns.sh addr NAME NODE            node NODE's address (10.200.0.NODE+1)
#   netns.sh bytes NAME NODE           bytes that left node NODE through its tbf qdisc (L2 bytes, as tc counts)
#   netns.sh drops NAME NODE           packets the qdisc dropped (should be 0; a drop means retransmissions)
#   netns.sh launch NAME -n L [--port P] -- PROG ARGS...
#                                      `baton run --nnodes N --node-rank R --rdzv ADDR0:P -n L -- PROG ...` in
#                                      every node at once (one fresh BATON_SECRET), waits for all; exits 0
#                                      when all did, else the first failing launcher's code
#   netns.sh with N [--rate R] -- CMD...
#                                      up, run CMD with BATON_CLUSTER=NAME in its environment, down (also when
#                                      CMD fails or this script is interrupted); exits with CMD's code
#   netns.sh hosts NAME NODE LINE...   node NODE's own /etc/hosts (localhost and LINEs; removed by down)
#   netns.sh gc                        remove clusters of this prefix whose creating process is gone
#
# Names: "$BATON_NETNS_PREFIX<pid>" (prefix default "baton-sim", pid of the process that ran `up`, or of
# the caller with --name), so parallel runs never collide; namespaces are NAME-n0.., NAME-br. BATON is the
# baton binary for `launch` (default build/baton). Needs root (ip netns, tc).
set -u
PREFIX=${BATON_NETNS_PREFIX:-baton-sim}
BATON=${BATON:-build/baton}
SUBNET=10.200.0

die() { echo "netns.sh: $*" >&2; exit 2; }

nodes_of() { # NAME -> node count (from the namespaces that exist)
    ip netns list 2>/dev/null | awk '{print $1}' | grep -c "^$1-n[0-9]*$"
}

check_name() {
    case "$1" in
        "" | *[!A-Za-z0-9_.-]*) die "cluster name '$1' must be letters, digits, '.', '_' or '-'" ;;
    esac
    [ ${#1} -le 40 ] || die "cluster name '$1' is longer than 40 characters"
}

node_ns() { # NAME NODE -> namespace, checked
    case "$2" in "" | *[!0-9]*) die "node '$2' is not a number" ;; esac
    ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1-n$2" || die "no node $2 in cluster '$1' (is it up?)"
    echo "$1-n$2"
}

cmd_down() {
    name=$1
    check_name "$name"
    # Kill what still runs inside the nodes (only processes in namespaces this script made), TERM then KILL.
    for sig in TERM KILL; do
        pids=
        for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$name-"); do
            pids="$pids $(ip netns pids "$ns" 2>/dev/null)"
        done
        pids=$(echo $pids)
        [ -z "$pids" ] && break
        kill -s $sig $pids 2>/dev/null
        i=0
        while [ $i -lt 20 ]; do
            alive=
            for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
            [ -z "$alive" ] && break
            sleep 0.1
            i=$((i + 1))
        done
    done
    # Deleting a namespace deletes its end of every veth pair, and with it the peer.
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-(n[0-9]+|br)$"); do
        ip netns del "$ns" 2>/dev/null
    done
    # a node's own /etc files (`hosts`), and /etc/netns itself once nothing else is in it
    rm -rf "/etc/netns/$name-"n[0-9]* 2>/dev/null
    rmdir /etc/netns 2>/dev/null
    return 0
}

cmd_up() {
    n=$1
    shift
    case "$n" in "" | *[!0-9]*) die "up: node count '$n' is not a number (e.g. netns.sh up 2)" ;; esac
    [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: node count $n is not in 1..200"
    rate=1gbit burst=128kb limit=32mb name="$PREFIX$$"
    while [ $# -gt 0 ]; do
        case "$1" in
            --rate) rate=${2:-}; shift 2 || die "up: --rate needs a value (e.g. 1gbit)" ;;
            --burst) burst=${2:-}; shift 2 || die "up: --burst needs a value (e.g. 128kb)" ;;
            --limit) limit=${2:-}; shift 2 || die "up: --limit needs a value (e.g. 32mb)" ;;
            --name) name=${2:-}; shift 2 || die "up: --name needs a value" ;;
            *) die "up: unknown option '$1' (--rate R, --burst B, --limit L, --name NAME)" ;;
        esac
    done
    check_name "$name"
    [ "$(id -u)" = 0 ] || die "up: needs root (ip netns, tc)"
    if ip netns list 2>/dev/null | awk '{print $1}' | grep -q "^$name-"; then die "up: cluster '$name' exists"; fi
    # On any failure below, remove what was made so far.
    trap 'cmd_down "$name"; exit 1' INT TERM
    ok=1
    {
        ip netns add "$name-br" &&
        ip -n "$name-br" link set lo up &&
        ip -n "$name-br" link add br0 type bridge &&
        ip -n "$name-br" link set br0 up
    } || ok=0
    i=0
    while [ $ok = 1 ] && [ $i -lt "$n" ]; do
        ns="$name-n$i"
        {
            ip netns add "$ns" &&
            ip -n "$ns" link set lo up &&
            ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$name-br" &&
            ip -n "$name-br" link set "p$i" master br0 &&
            ip -n "$name-br" link set "p$i" up &&
            ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0 &&
            ip -n "$ns" link set eth0 up &&
            tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" limit "$limit"
        } || ok=0
        i=$((i + 1))
    done
    if [ $ok = 0 ]; then
        cmd_down "$name"
        die "up: could not create cluster '$name' (see the error above; rate '$rate', burst '$burst', limit '$limit')"
    fi
    trap - INT TERM
    echo "$name"
}

cmd_launch() {
    name=$1
    shift
    check_name "$name"
    nn=$(nodes_of "$name")
    [ "$nn" -ge 1 ] || die "launch: no cluster '$name' (run netns.sh up N first)"
    local_n=1 port=29500
    while [ $# -gt 0 ]; do
        case "$1" in
            -n) local_n=${2:-}; shift 2 || die "launch: -n needs a value" ;;
            --port) port=${2:-}; shift 2 || die "launch: --port needs a value" ;;
            --) shift; break ;;
            *) die "launch: unknown option '$1' (-n L, --port P, then -- PROG ARGS...)" ;;
        esac
    done
    [ $# -ge 1 ] || die "launch: no program (netns.sh launch NAME -n 2 -- build/baton bench allreduce)"
    secret=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
    pids=
    r=0
    while [ $r -lt "$nn" ]; do
        BATON_SECRET=$secret ip netns exec "$name-n$r" "$BATON" run --nnodes "$nn" --node-rank $r \
            --rdzv "$SUBNET.1:$port" -n "$local_n" -- "$@" &
        pids="$pids $!"
        r=$((r + 1))
    done
    trap 'kill $pids 2>/dev/null; wait; exit 130' INT TERM
    rc=0
    for p in $pids; do
        wait "$p"
        c=$?
        [ $rc = 0 ] && rc=$c
    done
    trap - INT TERM
    return $rc
}

cmd_with() {
    n=$1
    shift
    args=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do args="$args $1"; shift; done
    [ "${1:-}" = -- ] || die "with: put the command after -- (netns.sh with 2 -- CMD...)"
    shift
    # shellcheck disable=SC2086
    name=$(cmd_up "$n" $args --name "$PREFIX$$") || exit 1
    trap 'cmd_down "$name"; exit 130' INT TERM
    trap 'cmd_down "$name"' EXIT
    BATON_CLUSTER=$name "$@"
    rc=$?
    trap - EXIT INT TERM
    cmd_down "$name"
    return $rc
}

qdisc_field() { # NAME NODE FIELD(sent|dropped)
    ns=$(node_ns "$1" "$2") || exit 2
    tc -n "$ns" -s qdisc show dev eth0 | awk -v f="$3" '
        $1 == "Sent" && f == "sent" { print $2; exit }
        $1 == "Sent" && f == "dropped" { d = $0; sub(/.*dropped /, "", d); sub(/,.*/, "", d); print d; exit }'
}

cmd_gc() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX[0-9]*-br$"); do
        name=${ns%-br}
        pid=${name#"$PREFIX"}
        kill -0 "$pid" 2>/dev/null || { echo "removing stale cluster $name"; cmd_down "$name"; }
    done
}

[ $# -ge 1 ] || die "usage: netns.sh up N [--rate R] | down NAME | exec NAME NODE CMD... | addr NAME NODE | bytes NAME NODE | drops NAME NODE | launch NAME -n L -- PROG... | with N -- CMD... | hosts NAME NODE LINE... | gc"
sub=$1
shift
case "$sub" in
    up) [ $# -ge 1 ] || die "up: how many nodes? (netns.sh up 2)"; cmd_up "$@" ;;
    down) [ $# -eq 1 ] || die "down: which cluster? (netns.sh down NAME)"; cmd_down "$1" ;;
    exec)
        [ $# -ge 3 ] || die "exec: netns.sh exec NAME NODE CMD..."
        check_name "$1"
        ns=$(node_ns "$1" "$2") || exit 2
        shift 2
        exec ip netns exec "$ns" "$@" ;;
    addr)
        [ $# -eq 2 ] || die "addr: netns.sh addr NAME NODE"
        check_name "$1"
        node_ns "$1" "$2" >/dev/null || exit 2
        echo "$SUBNET.$(($2 + 1))" ;;
    bytes) [ $# -eq 2 ] || die "bytes: netns.sh bytes NAME NODE"; check_name "$1"; qdisc_field "$1" "$2" sent ;;
    drops) [ $# -eq 2 ] || die "drops: netns.sh drops NAME NODE"; check_name "$1"; qdisc_field "$1" "$2" dropped ;;
    launch) [ $# -ge 1 ] || die "launch: netns.sh launch NAME -n L -- PROG..."; cmd_launch "$@" ;;
    with) [ $# -ge 1 ] || die "with: netns.sh with N -- CMD..."; cmd_with "$@" ;;
    gc) cmd_gc ;;
    hosts) # NAME NODE LINE...: node NODE's /etc/hosts is these lines (ip netns exec mounts /etc/netns/NS/hosts
           # over /etc/hosts), e.g. Debian's entry for the machine's own name: hosts NAME 0 "127.0.1.1 node0"
        [ $# -ge 3 ] || die "hosts: NAME NODE LINE..."
        ns=$(node_ns "$1" "$2") || exit 2
        shift 2
        mkdir -p "/etc/netns/$ns" || die "cannot make /etc/netns/$ns"
        { echo "127.0.0.1 localhost"; for l in "$@"; do echo "$l"; done; } >"/etc/netns/$ns/hosts" ;;
    *) die "unknown command '$sub' (up, down, exec, addr, bytes, drops, launch, with, hosts, gc)" ;;
esac
