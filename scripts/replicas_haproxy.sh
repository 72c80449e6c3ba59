#!/usr/bin/env bash
# Runs N `splitdec serve` replicas behind HAProxy on loopback, each
# conversation routed to one replica by a hash of its first messages
# (deploy/haproxy/haproxy.cfg, deploy/README.md).
#
#   scripts/replicas_haproxy.sh MODEL_DIR N FRONT_PORT [SERVE_OPTION...]
#
# Clients use http://127.0.0.1:FRONT_PORT/v1/...; replica i (1..N) listens on
# FRONT_PORT+i, HAProxy's stats page on FRONT_PORT+N+1 (/stats, /stats;csv).
# SERVE_OPTIONs go to every replica (e.g. --max-length 4096 --threads 8).
# Each replica is supervised: one that exits (crash, kill, or a SIGTERM
# drain for a rolling restart) is started again after RESTART_DELAY seconds.
# SIGINT/SIGTERM to this script shuts down cleanly: HAProxy stops listening
# and finishes its connections, every replica drains (SIGTERM), then it
# exits.
#
# Environment: SPLITDEC (the binary; default build/splitdec), HAPROXY
# (default haproxy), RUN_DIR (logs, pid files, the filled config; default a
# new temporary directory), CHECK_INTER / CHECK_RISE / CHECK_FALL (HAProxy's
# /ready check: default 1s, 2, 2), RESTART_DELAY (default 1).
# RUN_DIR holds replicaI.pid (the replica's current pid), replicaI.log,
# haproxy.cfg, haproxy.log, haproxy.sock (admin socket) and, once HAProxy
# sees every replica up, the file "ready".
set -euo pipefail

if [ $# -lt 3 ]; then
  sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
model=$1 n=$2 front=$3
shift 3
serve_args=("$@")
here="$(cd "$(dirname "$0")" && pwd)"
splitdec=${SPLITDEC:-$here/../build/splitdec}
haproxy_bin=${HAPROXY:-haproxy}
run_dir=${RUN_DIR:-$(mktemp -d -t splitdec-replicas.XXXXXX)}
check_inter=${CHECK_INTER:-1s} check_rise=${CHECK_RISE:-2} check_fall=${CHECK_FALL:-2}
restart_delay=${RESTART_DELAY:-1}
stats=$((front + n + 1))

[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "replicas_haproxy: N must be a positive integer" >&2; exit 2; }
if ! [[ "$front" =~ ^[0-9]+$ ]] || [ "$stats" -gt 65535 ]; then
  echo "replicas_haproxy: ports out of range" >&2; exit 2
fi
[ -d "$model" ] || { echo "replicas_haproxy: no model directory $model" >&2; exit 2; }
[ -x "$splitdec" ] || { echo "replicas_haproxy: no splitdec binary at $splitdec (set SPLITDEC)" >&2; exit 2; }
command -v "$haproxy_bin" >/dev/null || { echo "replicas_haproxy: no haproxy (apt-get install haproxy)" >&2; exit 2; }
mkdir -p "$run_dir"
rm -f "$run_dir/ready" "$run_dir/stopping"

# The config: the template with its fields filled and one server line per
# replica.
servers=""
for i in $(seq 1 "$n"); do
  servers+="    server r$i 127.0.0.1:$((front + i))"$'\n'
done
cfg="$run_dir/haproxy.cfg"
awk -v servers="$servers" -v front="$front" -v stats="$stats" -v run_dir="$run_dir" \
    -v inter="$check_inter" -v rise="$check_rise" -v fall="$check_fall" '
  $0 == "@SERVERS@" { printf "%s", servers; next }
  { gsub(/@FRONT_PORT@/, front); gsub(/@STATS_PORT@/, stats); gsub(/@RUN_DIR@/, run_dir)
    gsub(/@CHECK_INTER@/, inter); gsub(/@CHECK_RISE@/, rise); gsub(/@CHECK_FALL@/, fall); print }
' "$here/../deploy/haproxy/haproxy.cfg" > "$cfg"
"$haproxy_bin" -c -q -f "$cfg"

# One supervisor per replica: start it, wait for it, start it again unless
# we are shutting down.
supervise() {
  local i=$1 port=$2 pid rc
  trap '' INT TERM  # the main shell stops replicas itself
  while [ ! -e "$run_dir/stopping" ]; do
    "$splitdec" serve --model "$model" --port "$port" "${serve_args[@]}" >>"$run_dir/replica$i.log" 2>&1 &
    pid=$!
    echo "$pid" > "$run_dir/replica$i.pid"
    echo "$(date +%T.%3N) replicas_haproxy: replica $i (pid $pid, port $port) started" >> "$run_dir/supervisor.log"
    rc=0; wait "$pid" || rc=$?
    echo "$(date +%T.%3N) replicas_haproxy: replica $i (pid $pid, port $port) exited with status $rc" >> "$run_dir/supervisor.log"
    [ -e "$run_dir/stopping" ] && break
    sleep "$restart_delay"
  done
}

supervisors=()
haproxy_pid=""
stop_replicas() {
  local i
  for i in $(seq 1 "$n"); do
    if [ -f "$run_dir/replica$i.pid" ]; then kill -TERM "$(cat "$run_dir/replica$i.pid")" 2>/dev/null || true; fi
  done
}
shutdown() {
  trap '' INT TERM
  touch "$run_dir/stopping"
  # HAProxy first (SIGUSR1: soft stop, it stops listening and finishes
  # what it carries), then drain every replica.
  if [ -n "$haproxy_pid" ]; then kill -USR1 "$haproxy_pid" 2>/dev/null || true; fi
  stop_replicas
  for p in "${supervisors[@]}"; do wait "$p" 2>/dev/null || true; done
  stop_replicas  # one started between the flag and its supervisor's check
  if [ -n "$haproxy_pid" ]; then wait "$haproxy_pid" 2>/dev/null || true; fi
  echo "replicas_haproxy: stopped (logs in $run_dir)"
}
trap 'shutdown; exit 0' INT TERM

for i in $(seq 1 "$n"); do
  supervise "$i" "$((front + i))" &
  supervisors+=($!)
done
"$haproxy_bin" -db -f "$cfg" >>"$run_dir/haproxy.log" 2>&1 &
haproxy_pid=$!
echo "$haproxy_pid" > "$run_dir/haproxy.pid"
echo "replicas_haproxy: $n replicas on 127.0.0.1:$((front + 1))-$((front + n)), HAProxy on 127.0.0.1:$front, stats http://127.0.0.1:$stats/stats, run dir $run_dir"

# Ready once HAProxy reports every replica UP.
while :; do
  if ! kill -0 "$haproxy_pid" 2>/dev/null; then
    echo "replicas_haproxy: haproxy exited; see $run_dir/haproxy.log" >&2
    shutdown; exit 1
  fi
  up=$(curl -s --max-time 2 "http://127.0.0.1:$stats/stats;csv" | awk -F, '$1 == "splitdec" && $2 ~ /^r[0-9]+$/ && $18 == "UP"' | wc -l || true)
  [ "$up" -eq "$n" ] && break
  sleep 0.2
done
touch "$run_dir/ready"
echo "replicas_haproxy: ready"

# Run until told to stop, or until HAProxy dies.
rc=0; wait "$haproxy_pid" || rc=$?
echo "replicas_haproxy: haproxy exited with status $rc; see $run_dir/haproxy.log" >&2
shutdown
exit 1
