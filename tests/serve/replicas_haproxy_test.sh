#!/usr/bin/env bash
# Two `splitdec serve` replicas behind HAProxy on loopback, as
# scripts/replicas_haproxy.sh runs them (deploy/README.md):
#   - a reference run on one server gives each scripted turn's greedy reply;
#   - affinity: every turn of a conversation lands on one replica and finds
#     its past in that replica's prefix cache; both replicas take some;
#   - SIGKILL one replica under load, the supervisor restarts it: every reply
#     is the reference's, only requests in flight on it may fail, all
#     succeed once it is up again;
#   - SIGTERM (drain) a replica under load: nothing fails;
#   - the Kubernetes manifest (deploy/kubernetes/splitdec.yaml) validates
#     against Kubernetes' schema and says what the recipe says.
#   bash tests/serve/replicas_haproxy_test.sh PATH/TO/splitdec
# Skips (exit 77, ctest's SKIP_RETURN_CODE) when haproxy or node is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
splitdec="$(cd "$(dirname "${1:?usage: $0 PATH/TO/splitdec}")" && pwd)/$(basename "$1")"

for tool in haproxy node curl; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool is not installed (scripts/setup.sh installs it)"
    exit 77
  fi
done

work="$(mktemp -d -t replicas-haproxy.XXXXXX)"
pids=()
cleanup() {
  local rc=$?
  trap '' INT TERM
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do timeout 15 tail --pid="$p" -f /dev/null 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
  # Anything the recipe left (it should leave nothing).
  for f in "$work"/run/replica*.pid "$work"/run/haproxy.pid; do
    if [ -f "$f" ]; then kill -KILL "$(cat "$f")" 2>/dev/null || true; fi
  done
  if [ "$rc" -ne 0 ]; then
    for f in "$work"/run/*.log "$work"/*.log; do
      [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 20 "$f"; }
    done
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
t_start=$SECONDS
step() { echo "[$((SECONDS - t_start)) s] $*"; }

# Free loopback ports: FRONT (HAProxy), FRONT+1, FRONT+2 (replicas),
# FRONT+3 (stats), FRONT+4 (the reference server). Below the ephemeral range,
# where no client connection holds a port for long, and unused in any state.
port_free() {
  if command -v ss >/dev/null; then
    [ -z "$(ss -Htan "( sport = :$1 )")" ]
  else
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 1; fi
  fi
}
ephemeral_low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
span=$((ephemeral_low - 10000 - 10))
[ "$span" -gt 1000 ] || span=20000
front=""
for _ in $(seq 50); do
  p=$((10000 + (RANDOM * 32768 + RANDOM) % span))
  ok=1
  for k in 0 1 2 3 4; do port_free $((p + k)) || { ok=0; break; }; done
  [ "$ok" = 1 ] && { front=$p; break; }
done
[ -n "$front" ] || { echo "FAIL: no free ports"; exit 1; }
ref_port=$((front + 4)) stats_url="http://127.0.0.1:$((front + 3))/stats"

wait_ready() {  # URL SECONDS
  local deadline=$((SECONDS + $2))
  until curl -sf --max-time 1 "$1" >/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "FAIL: $1 not ready in $2 s"; return 1; }
    sleep 0.1
  done
}

step "tiny model, ports $front..$((front + 4))"
timeout 60 "$splitdec" make-model --preset tiny-gemma3 --out "$work/model" >/dev/null
serve_opts=(--max-length 1024 --threads 1)

# 1. The reference: one server, each scripted turn's greedy reply.
step "reference run on one server"
"$splitdec" serve --model "$work/model" --port "$ref_port" "${serve_opts[@]}" >"$work/reference.log" 2>&1 &
ref_pid=$!
pids+=("$ref_pid")
wait_ready "http://127.0.0.1:$ref_port/ready" 60
timeout 60 node "$here/replicas_load.mjs" reference "http://127.0.0.1:$ref_port" "$work/refs.json"
kill -TERM "$ref_pid"
timeout 30 tail --pid="$ref_pid" -f /dev/null

# 2. Two replicas behind HAProxy, readiness checked every 250 ms.
step "2 replicas behind haproxy"
mkdir -p "$work/run"
RUN_DIR="$work/run" SPLITDEC="$splitdec" CHECK_INTER=250ms CHECK_RISE=1 CHECK_FALL=1 RESTART_DELAY=1 \
  bash "$root/scripts/replicas_haproxy.sh" "$work/model" 2 "$front" "${serve_opts[@]}" >"$work/recipe.log" 2>&1 &
recipe_pid=$!
pids+=("$recipe_pid")
deadline=$((SECONDS + 60))
until [ -e "$work/run/ready" ]; do
  kill -0 "$recipe_pid" 2>/dev/null || { echo "FAIL: the recipe exited"; cat "$work/recipe.log"; exit 1; }
  [ "$SECONDS" -lt "$deadline" ] || { echo "FAIL: replicas not up in 60 s"; exit 1; }
  sleep 0.1
done
url="http://127.0.0.1:$front"

# 3. Affinity: a conversation's turns on one replica, its past cached there.
step "affinity"
timeout 60 node "$here/replicas_load.mjs" affinity "$url" "$work/refs.json" 2
# Each replica's own count: 8 chats of 4 turns are 24 later turns, each a hit.
metric() { curl -sf --max-time 2 "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m { print $2 }'; }
hits=0
for i in 1 2; do
  h=$(metric $((front + i)) splitdec_prefix_cache_hits_total)
  m=$(metric $((front + i)) splitdec_prefix_cache_misses_total)
  echo "replica r$i: prefix cache hits $h, misses $m"
  [ "${h%.*}" -gt 0 ] || { echo "FAIL: replica r$i had no prefix cache hit"; exit 1; }
  hits=$((hits + ${h%.*}))
done
[ "$hits" -ge 24 ] || { echo "FAIL: $hits prefix cache hits for 24 later turns"; exit 1; }

# 4. SIGKILL replica 1 under load; the supervisor restarts it.
step "SIGKILL r1 under load"
WORKERS=6 KILL_AT_MS=1500 AFTER_UP_MS=1500 \
  timeout 90 node "$here/replicas_load.mjs" fault "$url" "$work/refs.json" "$work/run" "$stats_url" 1 SIGKILL

# 5. SIGTERM replica 2 under load: a drain, then a restart. Nothing lost.
step "SIGTERM (drain) r2 under load"
WORKERS=6 KILL_AT_MS=1500 AFTER_UP_MS=1500 \
  timeout 90 node "$here/replicas_load.mjs" fault "$url" "$work/refs.json" "$work/run" "$stats_url" 2 SIGTERM
grep -q "replica 2 .* exited with status 0" "$work/run/supervisor.log" ||
  { echo "FAIL: r2 did not drain and exit 0"; cat "$work/run/supervisor.log"; exit 1; }

# 6. The recipe shuts down cleanly: everything it started exits.
step "clean shutdown"
kill -TERM "$recipe_pid"
timeout 30 tail --pid="$recipe_pid" -f /dev/null || { echo "FAIL: the recipe did not stop in 30 s"; exit 1; }
rc=0; wait "$recipe_pid" || rc=$?
[ "$rc" -eq 0 ] || { echo "FAIL: the recipe exited with $rc"; cat "$work/recipe.log"; exit 1; }
for f in "$work"/run/replica*.pid "$work"/run/haproxy.pid; do
  if kill -0 "$(cat "$f")" 2>/dev/null; then echo "FAIL: $(basename "$f" .pid) still runs"; exit 1; fi
done

# 7. The Kubernetes manifest: Kubernetes' schema (kubernetes-models, from
# tests/serve's npm lock), what it says against the recipe, haproxy -c on
# the router's config, and yamllint where it is installed.
step "kubernetes manifest"
manifest="$root/deploy/kubernetes/splitdec.yaml"
if [ -f "$here/node_modules/kubernetes-models/package.json" ]; then
  timeout 60 node "$here/check_k8s_manifest.mjs" "$manifest" "$root/deploy/haproxy/haproxy.cfg" "$(command -v haproxy)"
else
  echo "FAIL: tests/serve/node_modules lacks kubernetes-models (scripts/setup.sh installs it)"
  exit 1
fi
if command -v yamllint >/dev/null; then
  timeout 30 yamllint -s -d '{extends: default, rules: {line-length: {max: 160}}}' "$manifest"
  echo "yamllint: clean"
fi

cat "$work/run/supervisor.log"
step "passed"
