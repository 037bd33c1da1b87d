# What the fleet benchmarks share: a free TCP port on 127.0.0.1, and waiting for a line in a
# service's log. Sourced by bench/mutate-fleet.sh and bench/prove-crate-pairs.sh.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_log() { until grep -q "$2" "$1" 2>/dev/null; do sleep 0.05; done; }
