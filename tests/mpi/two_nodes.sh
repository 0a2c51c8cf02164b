# two_nodes.sh: two real nodes on one machine. Everything else multi-node in
# this project is simulated; here the launch itself runs across nodes: two
# network namespaces (each a "node", with its own interfaces, addresses,
# ports and firewall), joined by a veth pair on a link-local subnet
# 169.254.X.0/24 (X random, 100..199; nothing else is ever a target, nothing
# leaves the machine), built here and torn down on any exit.
#
#   mpirun     chapter 5's table and chapter 6's training (--backend=mpi
#              --check), one rank per node: mpirun runs in node 0, and Open
#              MPI's rsh launch agent is a script that enters the namespace of
#              the host it is asked to start on (ip netns exec)
#   torchrun   chapter 5's --launch-check from a real torchrun per node
#              (--nnodes=2 --node_rank=N), then from variables set by hand;
#              chapter 6 started that way needs NCCL, hence a GPU: without one
#              it refuses in one line
#   failures   the classic ones, each ending in bounded time with its cause
#              named: rank 0 listening on the wrong interface (--ifname=lo), the
#              port dropped by a firewall rule in node 0 (nftables), a node that
#              starts late (within the timeout: fine; past it: rank 0 names the
#              rank that never came)
#
# Needs root, ip (iproute2) and namespaces the kernel lets us create (a
# container without CAP_SYS_ADMIN does not): otherwise every test is skipped,
# saying why. Which process ran where is proved by `ip netns identify` from
# inside each rank (where.sh below), not by what the programs say.
. "$(dirname "$0")/../harness/lib.sh"

T_TIMEOUT=120
P5=$(realpath -m "$BUILD/chapter-5")
P6=$(realpath -m "$BUILD/chapter-6")
names=(nodes.up mpirun.chapter5 mpirun.chapter5_on_two_nodes mpirun.chapter6 mpirun.chapter6_on_two_nodes
    mpirun.node1_through_agent torchrun.launch_check torchrun.on_two_nodes by_hand.launch_check by_hand.on_two_nodes
    chapter6.torchrun_env_refused
    ifname.rank1_refused ifname.rank0_names_its_interface firewall.rank1_dropped firewall.rank0_never_saw_rank1
    late.within_timeout late.past_timeout_rank0_names_rank1 late.past_timeout_rank1_refused nodes.torn_down)
skip_all() { local n; for n in "${names[@]}"; do t_skip "$n" "$1"; done; exit 0; }

if [ ! -x "$P5" ] || [ ! -x "$P6" ]; then t_failed built "$P5 or $P6 is missing"; exit 0; fi
[ "$(id -u)" = 0 ] || skip_all "not root: network namespaces need root (CAP_SYS_ADMIN)"
command -v ip > /dev/null 2>&1 || skip_all "no ip command (apt-get install iproute2)"

# ---- the two nodes -------------------------------------------------------------------
id=ddp$$
NS0=$id-node0 NS1=$id-node1
X=$((100 + RANDOM % 100))
A0=169.254.$X.1 A1=169.254.$X.2
nodes_made=0
nodes_down() { # what nodes_up made, whatever state it got to; safe to call twice
    local ns pid
    [ $nodes_made = 1 ] || return 0
    for ns in "$NS0" "$NS1"; do
        # a rank still running in a node (a failed test's) keeps it alive: it ends with the node
        for pid in $(ip netns pids "$ns" 2> /dev/null); do kill -KILL "$pid" 2> /dev/null || true; done
        ip netns del "$ns" 2> /dev/null || true
    done
    ip link del "${id}a" 2> /dev/null || true # only there when setup stopped before moving it
    nodes_made=0
}
trap 'nodes_down; rm -rf "$T_TMP"' EXIT
trap 'exit 130' INT TERM HUP # (exit runs the EXIT trap)

nodes_up() { # 0, or prints why not (run in a subshell: nodes_made is set by the caller)
    ip netns add "$NS0" 2>&1 && ip netns add "$NS1" 2>&1 &&
        ip link add "${id}a" type veth peer name "${id}b" 2>&1 &&
        ip link set "${id}a" netns "$NS0" 2>&1 && ip link set "${id}b" netns "$NS1" 2>&1 &&
        # the same kind of name on both nodes: node0 and node1
        ip -n "$NS0" link set "${id}a" name node0 2>&1 && ip -n "$NS1" link set "${id}b" name node1 2>&1 &&
        ip -n "$NS0" addr add "$A0/24" dev node0 2>&1 && ip -n "$NS1" addr add "$A1/24" dev node1 2>&1 &&
        ip -n "$NS0" link set lo up 2>&1 && ip -n "$NS1" link set lo up 2>&1 &&
        ip -n "$NS0" link set node0 up 2>&1 && ip -n "$NS1" link set node1 up 2>&1
}
# A run killed outright (SIGKILL: no trap runs) leaves its nodes; the next run
# removes those whose test process is gone
for ns in $(ip netns list 2> /dev/null | sed -n 's/^\(ddp[0-9]*-node[01]\)\( .*\)\{0,1\}$/\1/p'); do
    pid=${ns#ddp}; pid=${pid%-node?}
    if ! kill -0 "$pid" 2> /dev/null; then ip netns del "$ns" 2> /dev/null || true; fi
done
nodes_made=1
if ! why=$(nodes_up); then
    nodes_down
    skip_all "this machine does not let us build two network namespaces: $(tail -n 1 <<<"$why")"
fi
t_pass nodes.up
on0=(ip netns exec "$NS0")

# where.sh CMD...: notes "<rank> <namespace>" in where.log, then runs CMD
cat > "$T_TMP/where.sh" << EOF
#!/bin/sh
# where.sh (written by tests/mpi/two_nodes.sh): which node this rank runs on
echo "\${OMPI_COMM_WORLD_RANK:-\${RANK:-?}} \$(ip netns identify \$\$)" >> "$T_TMP/where.log"
exec "\$@"
EOF
# agent.sh HOST CMD...: Open MPI's rsh launch agent, as ssh would be: starts CMD on HOST's node
cat > "$T_TMP/agent.sh" << EOF
#!/bin/sh
# agent.sh (written by tests/mpi/two_nodes.sh): Open MPI's plm_rsh_agent for the two nodes
host=\$1; shift
case \$host in
$A0) ns=$NS0 ;;
$A1) ns=$NS1 ;;
*) echo "agent.sh: \$host is not one of the two nodes ($A0, $A1)" >&2; exit 1 ;;
esac
echo "\$host \$ns" >> "$T_TMP/agent.log"
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$T_TMP/where.sh" "$T_TMP/agent.sh"

# placed NAME: where.log says rank 0 ran on node 0 and rank 1 on node 1, nothing else
placed() {
    local want got
    want=$(printf '0 %s\n1 %s' "$NS0" "$NS1")
    got=$(sort "$T_TMP/where.log" 2> /dev/null)
    if [ "$got" = "$want" ]; then t_pass "$1"
    else t_failed "$1" "expected rank 0 on $NS0 and rank 1 on $NS1, where.log says: $(tr '\n' ';' <<<"$got")"; fi
    rm -f "$T_TMP/where.log"
}

# ---- mpirun across the nodes -----------------------------------------------------------
# Open MPI 4.1: the rsh agent starts orted on node 1 (mpirun, in node 0, runs
# rank 0 itself: the host is its own address); TCP only (no shared memory
# across nodes), and both TCP layers kept to the veth subnet, which both
# nodes' interfaces (node0, node1) are on.
if t_need_mpirun mpirun.chapter5; then
    printf '%s slots=1\n%s slots=1\n' "$A0" "$A1" > "$T_TMP/hosts"
    # shellcheck disable=SC2054 # (tcp,self is one argument)
    mpirun=(mpirun --hostfile "$T_TMP/hosts" -np 2 --mca plm_rsh_agent "$T_TMP/agent.sh" --mca btl tcp,self
        --mca btl_tcp_if_include "169.254.$X.0/24" --mca oob_tcp_if_include "169.254.$X.0/24")
    rm -f "$T_TMP/where.log" "$T_TMP/agent.log"
    t_out mpirun.chapter5 "# Out of bounds values : 0 OK" "${on0[@]}" "${mpirun[@]}" "$T_TMP/where.sh" "$P5" --backend=mpi \
        --check --min-bytes=4 --max-bytes=256K --step-factor=8 --iters=2 --warmup=1
    placed mpirun.chapter5_on_two_nodes
    t_out mpirun.chapter6 "replicas: every rank's parameters were the same bits at every step" "${on0[@]}" \
        "${mpirun[@]}" \
        "$T_TMP/where.sh" "$P6" --backend=mpi --device=sim --check --data=synthetic --test-data=none \
        --train-size=512 --batch=32 --steps=4 --out="$T_TMP/ch6"
    placed mpirun.chapter6_on_two_nodes
    if grep -qx "$A1 $NS1" "$T_TMP/agent.log" 2> /dev/null; then t_pass mpirun.node1_through_agent
    else t_failed mpirun.node1_through_agent "Open MPI did not start node 1 through agent.sh: \
$(cat "$T_TMP/agent.log" 2> /dev/null)"; fi
else
    for n in mpirun.chapter5_on_two_nodes mpirun.chapter6 mpirun.chapter6_on_two_nodes mpirun.node1_through_agent; do
        t_skip $n "no mpirun jobs here (see mpirun.chapter5)"
    done
fi

# ---- torchrun-style across the nodes ---------------------------------------------------
# check_ranks NAME: T_OUT has rank 0's and rank 1's "reached rank 0" line, one token
check_ranks() {
    local tokens
    if [ "$T_STATUS" != 0 ]; then
        t_failed "$1" "expected exit 0, got $T_STATUS: $(grep -m 3 'chapter-5:\|Error' <<<"$T_OUT" || tail -n 5 <<<"$T_OUT")"
        return
    fi
    tokens=$(grep -o "^rank [01] of 2 (local rank 0): reached rank 0 at $A0:[0-9]*, token [0-9a-f]*$" <<<"$T_OUT" |
        sed 's/.*token //' | sort | uniq -c | awk '{ print $1 }')
    if [ "$tokens" = 2 ]; then t_pass "$1"
    else t_failed "$1" "expected ranks 0 and 1 to reach rank 0 at $A0 with one token: $(tail -n 6 <<<"$T_OUT")"; fi
}
# (every status here is caught: lib.sh's t_run leaves `set -e` on)
# both NODE1_DELAY CMD0 -- CMD1: CMD0 on node 0 and, NODE1_DELAY seconds later, CMD1 on
# node 1, each under a time limit; T_OUT is both outputs, T_STATUS the first failure's
both() {
    local delay=$1 cmd0=() s0 s1
    shift
    while [ "$1" != -- ]; do cmd0+=("$1"); shift; done
    shift
    timeout -k 5 "$T_TIMEOUT" ip netns exec "$NS0" "${cmd0[@]}" > "$T_TMP/node0.out" 2>&1 &
    local pid0=$!
    sleep "$delay"
    timeout -k 5 "$T_TIMEOUT" ip netns exec "$NS1" "$@" > "$T_TMP/node1.out" 2>&1 && s1=0 || s1=$?
    wait $pid0 && s0=0 || s0=$?
    T_STATUS=$s0
    [ $s0 = 0 ] && T_STATUS=$s1
    T_OUT=$(cat "$T_TMP/node0.out" "$T_TMP/node1.out")
}
port=$((20000 + RANDOM % 20000)) # the nodes are ours alone: any port is free there
# Debian's torch 1.13 under Python 3.11 cannot parse --redirects=0 (launch_torchrun.sh says why)
torchrun=(/usr/bin/python3 -m torch.distributed.run --redirects=9:1 --tee=9:1 --no_python --nnodes=2
    --nproc_per_node=1 --master_addr="$A0" --master_port="$port")
if ! /usr/bin/python3 -c 'import torch.distributed.run' > /dev/null 2>&1; then
    t_skip torchrun.launch_check "no torch.distributed.run (apt-get install python3-torch)"
    t_skip torchrun.on_two_nodes "no torch.distributed.run (apt-get install python3-torch)"
else
    rm -f "$T_TMP/where.log"
    both 0 "${torchrun[@]}" --node_rank=0 "$T_TMP/where.sh" "$P5" --launch-check --timeout=60 -- \
        "${torchrun[@]}" --node_rank=1 "$T_TMP/where.sh" "$P5" --launch-check --timeout=60
    check_ranks torchrun.launch_check
    placed torchrun.on_two_nodes
fi
# By hand, as a cluster's scheduler would set them: what torchrun 1.13 gives
# each worker of a 2-node job, one per node (GROUP_RANK and GROUP_WORLD_SIZE:
# the node's rank and the node count, --node_rank and --nnodes; torchrun sets
# no NODE_RANK, but launch scripts pass one: set too, ignored like the others)
launch_env=(WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_WORLD_SIZE=2 MASTER_ADDR="$A0"
    MASTER_PORT=$((port + 2)))
env0=(env RANK=0 GROUP_RANK=0 NODE_RANK=0 "${launch_env[@]}") # the one rank on node 0
env1=(env RANK=1 GROUP_RANK=1 NODE_RANK=1 "${launch_env[@]}") # and on node 1
rm -f "$T_TMP/where.log"
both 0 "${env0[@]}" "$T_TMP/where.sh" "$P5" --launch-check --timeout=60 -- \
    "${env1[@]}" "$T_TMP/where.sh" "$P5" --launch-check --timeout=60
check_ranks by_hand.launch_check
placed by_hand.on_two_nodes

# chapter 6 started torchrun-style needs NCCL, so a GPU on each node: without
# one, each rank refuses in one line before it starts anything
if [ "$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')" -gt 0 ]; then
    t_skip chapter6.torchrun_env_refused "a GPU is here: tests/gpu/ runs chapter 6 on NCCL"
else
    ch6=("$P6" --backend=nccl --data=synthetic --test-data=none --train-size=512 --batch=32 --steps=3
        --out="$T_TMP/ch6")
    both 0 "${env0[@]}" "${ch6[@]}" -- "${env1[@]}" "${ch6[@]}"
    lines=$(grep -c '^chapter-6: ' "$T_TMP/node1.out" || true)
    if [ "$T_STATUS" = 0 ] || [ "$lines" != 1 ] || [ "$(wc -l < "$T_TMP/node1.out")" != 1 ] ||
        ! grep -q '^chapter-6: --device=cuda (what --backend=nccl needs): \|^chapter-6: .*--backend=nccl' \
            "$T_TMP/node1.out"; then
        t_failed chapter6.torchrun_env_refused "expected one line naming --backend=nccl's need, exit non-zero; got \
status $T_STATUS: $(head -n 3 "$T_TMP/node1.out")"
    else t_pass chapter6.torchrun_env_refused; fi
fi

# ---- the classic failures --------------------------------------------------------------
# a. rank 0 listens on lo only (--ifname=lo): rank 1, on the other node, is refused;
#    each side ends at its timeout, naming the likely cause
both 0 "${env0[@]}" "$P5" --launch-check --ifname=lo --timeout=3 -- \
    "${env1[@]}" "$P5" --launch-check --timeout=3
T_OUT=$(cat "$T_TMP/node1.out")
t_said ifname.rank1_refused "rank 1: no rank 0 listening at $A0:$((port + 2)) after 3 s: connection refused (rank 0 \
not started? or it listens on another interface only, as with --ifname=lo?)"
T_OUT=$(cat "$T_TMP/node0.out")
t_said ifname.rank0_names_its_interface "rank(s) 1 of 2 never connected within 3 s (are they started, with \
MASTER_ADDR/MASTER_PORT pointing here?); rank 0 listened on 127.0.0.1 (interface lo) only"

# b. node 0's firewall drops the port: rank 1's attempts go unanswered (not
#    refused), until its timeout, which says so
if ! command -v nft > /dev/null 2>&1; then
    t_skip firewall.rank1_dropped "no nft (apt-get install nftables; make deps does)"
    t_skip firewall.rank0_never_saw_rank1 "no nft (apt-get install nftables; make deps does)"
elif ! why=$("${on0[@]}" nft -f - 2>&1 <<EOF
table inet ddp_test {
    chain input {
        type filter hook input priority 0; policy accept;
        tcp dport $((port + 2)) drop
    }
}
EOF
); then
    t_skip firewall.rank1_dropped "nft cannot add a rule in node 0: $why"
    t_skip firewall.rank0_never_saw_rank1 "nft cannot add a rule in node 0: $why"
else
    both 0 "${env0[@]}" "$P5" --launch-check --timeout=3 -- "${env1[@]}" "$P5" --launch-check --timeout=3
    "${on0[@]}" nft delete table inet ddp_test || true
    T_OUT=$(cat "$T_TMP/node1.out")
    t_said firewall.rank1_dropped "rank 1: rank 0 at $A0:$((port + 2)) did not answer within 3 s: the connection \
attempts were dropped, not refused (a firewall dropping port $((port + 2)) on the way or on rank 0's node?)"
    T_OUT=$(cat "$T_TMP/node0.out")
    t_said firewall.rank0_never_saw_rank1 "rank(s) 1 of 2 never connected within 3 s"
fi

# c. node 1 starts 2 s late, well inside the 60 s timeout: the job goes on
both 2 "${env0[@]}" "$P5" --launch-check --timeout=60 -- "${env1[@]}" "$P5" --launch-check --timeout=60
check_ranks late.within_timeout
#    ...and after rank 0 gave up (node 1 starts once rank 0 has listened and left
#    node 0): rank 0 names the rank that never came; rank 1 finds nobody listening
# shellcheck disable=SC2016 # (sh expands them)
both 0 "${env0[@]}" "$P5" --launch-check --timeout=2 -- sh -c 'until grep -q listening "$1"; do sleep 0.1; done
    while ip netns pids "$2" | grep -q .; do sleep 0.1; done
    shift 2; exec "$@"' late "$T_TMP/node0.out" "$NS0" "${env1[@]}" "$P5" --launch-check --timeout=2
T_OUT=$(cat "$T_TMP/node0.out")
t_said late.past_timeout_rank0_names_rank1 "chapter-5: rank 0 of 2: rendezvous: rank 0 at port $((port + 2)): rank(s) \
1 of 2 never connected within 2 s"
T_OUT=$(cat "$T_TMP/node1.out")
t_said late.past_timeout_rank1_refused "rank 1: no rank 0 listening at $A0:$((port + 2)) after 2 s: connection refused"

# ---- and nothing left behind -----------------------------------------------------------
nodes_down
left=$( (ip netns list; ip -o link) | grep -F "$id" || true)
if [ -z "$left" ]; then t_pass nodes.torn_down; else t_failed nodes.torn_down "still there: $left"; fi
