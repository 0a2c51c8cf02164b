# launch_torchrun: ranks started torchrun-style meet rank 0 over our TCP
# rendezvous (lib/comm/rendezvous.c), checked with `build/chapter-5 --launch-check`
# (no GPU needed). Started by a real torchrun (Debian's python3-torch) in both
# of its rendezvous modes: the default (static) one, whose agent already serves
# its TCPStore on MASTER_PORT, so our rank 0 must step to the next port; and
# c10d (what --standalone uses), where MASTER_PORT is free. Then by hand, as
# Slurm or a shell loop would set the variables; then the failures: a rank
# that never comes, a port that is taken, no launcher variables at all.
. "$(dirname "$0")/../harness/lib.sh"

prog=$BUILD/chapter-5
T_TIMEOUT=120

# a port nobody listens on now, and (for torchrun's agent) its successor
free_port() {
    if [ -x /usr/bin/python3 ]; then
        /usr/bin/python3 -c 'import socket
for _ in range(50):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; t = socket.socket()
    try:
        t.bind(("127.0.0.1", p + 1)); print(p); break
    except OSError:
        pass'
    else
        echo $((20000 + RANDOM % 30000))
    fi
}

# T_OUT (from t_run) must hold one "reached rank 0" line per rank 0..N-1,
# all with the same token, and the command must have exited 0.
check_ranks() { # name N
    local name=$1 n=$2 r tokens
    if [ "$T_STATUS" != 0 ]; then
        t_failed "$name" "expected exit 0, got $T_STATUS; errors: $(grep -m 3 'chapter-5:' <<<"$T_OUT" || tail -n 5 <<<"$T_OUT")"
        return
    fi
    for ((r = 0; r < n; r++)); do
        if ! grep -q "^rank $r of $n (local rank $r): reached rank 0 at " <<<"$T_OUT"; then
            t_failed "$name" "no line from rank $r of $n; output: $(tail -n 6 <<<"$T_OUT")"; return
        fi
    done
    tokens=$(grep -o 'reached rank 0 at .*, token [0-9a-f]*$' <<<"$T_OUT" | sed 's/.*token //' | sort -u | wc -l)
    if [ "$tokens" != 1 ]; then t_failed "$name" "ranks got $tokens different tokens: $T_OUT"
    else t_pass "$name"; fi
}

if [ ! -x "$prog" ]; then
    t_failed built "$prog is missing"
    exit 0
fi

# ---- a real torchrun --------------------------------------------------------------
# Debian's torch 1.13 under Python 3.11 cannot parse --redirects=0 (the zero
# member of its Std flag is not iterated any more, so "0" maps to None and the
# agent crashes); a mapping for a local rank that does not exist (9) leaves
# every real one unredirected.
torchrun=(/usr/bin/python3 -m torch.distributed.run --redirects=9:1 --tee=9:1 --no_python --nproc_per_node=3)
if ! /usr/bin/python3 -c 'import torch.distributed.run' >/dev/null 2>&1; then
    t_skip torchrun.static "no torch.distributed.run (apt-get install python3-torch)"
    t_skip torchrun.c10d "no torch.distributed.run (apt-get install python3-torch)"
else
    port=$(free_port)
    t_run "${torchrun[@]}" --master_port="$port" "$prog" --launch-check --timeout=30
    check_ranks torchrun.static 3
    if [ "$T_STATUS" = 0 ] && ! grep -qF "rank 0 of 3: listening on port $((port + 1)) (MASTER_PORT + 1" <<<"$T_OUT"; then
        t_failed torchrun.static_port "expected rank 0 on MASTER_PORT + 1 = $((port + 1)): $T_OUT"
    else t_pass torchrun.static_port; fi
    # --standalone is c10d on localhost:29400; a free port instead keeps this
    # test clear of anything else on the machine that uses torchrun's default
    t_run "${torchrun[@]}" --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$(free_port)" --rdzv_id=launch-check \
        "$prog" --launch-check --timeout=30
    check_ranks torchrun.c10d 3
fi

# ---- by hand: N processes, started in reverse so rank 0 comes last ---------------
launch_by_hand() { # N VAR=VALUE...: sets T_OUT and T_STATUS as t_run does
    local n=$1 r; shift
    for ((r = n - 1; r >= 0; r--)); do
        env RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 "$@" \
            timeout -k 5 60 "$prog" --launch-check --timeout=30 > "$T_TMP/rank$r.out" 2>&1 &
    done
    T_STATUS=0
    for ((r = 0; r < n; r++)); do wait -n || T_STATUS=$?; done
    T_OUT=$(cat "$T_TMP"/rank*.out)
    rm -f "$T_TMP"/rank*.out
}
launch_by_hand 4 MASTER_PORT="$(free_port)"
check_ranks by_hand 4

# ---- failures ----------------------------------------------------------------------
port=$(free_port)
t_fail missing_rank 1 "rank(s) 1, 2 of 3 never connected" \
    env RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$prog" --launch-check --timeout=1
t_said missing_rank_names_the_flag "within 1 s (are they started, with MASTER_ADDR/MASTER_PORT pointing here?); --timeout=SECONDS waits longer"
t_fail no_rank_0 1 "no rank 0 listening at 127.0.0.1:$port" \
    env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$prog" --launch-check --timeout=1
t_said no_rank_0_names_the_flag "after 1 s: connection refused (rank 0 not started? or it listens on another interface only, as with --ifname=lo?); --timeout=SECONDS waits longer"

# A port already held (here by another job's rank 0, as torchrun's agent would)
# is named, with the way out; and the way out works.
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout -k 5 30 "$prog" --launch-check --timeout=5 \
    > "$T_TMP/holder.out" 2>&1 &
holder=$!
for _ in $(seq 50); do grep -q listening "$T_TMP/holder.out" && break; sleep 0.1; done
t_fail port_taken 1 "from MASTER_PORT (if another process holds it, set DDP_RENDEZVOUS_PORT to a free port" \
    env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" "$prog" --launch-check --timeout=1
# ... and the rank that could not take it never said it was listening
if grep -q listening <<<"$T_OUT"; then t_failed port_taken_never_listened "$T_OUT"
else t_pass port_taken_never_listened; fi
launch_by_hand 2 MASTER_PORT="$port" DDP_RENDEZVOUS_PORT="$(free_port)"
check_ranks own_port 2
wait "$holder" 2>/dev/null || true

t_fail no_launcher 1 "--launch-check is for ranks started torchrun-style: WORLD_SIZE is not set" \
    env -u RANK -u WORLD_SIZE "$prog" --launch-check
