# Process helpers of up.sh and down.sh (sourced after env.sh): each
# service runs in the namespace as a session of its own, its pid in
# $OS_STATE/run/NAME.pid and its output in $OS_STATE/logs/NAME.out.

# running NAME: the service's recorded process exists and is not a zombie.
running() {
  local pid state
  pid=$(cat "$OS_STATE/run/$1.pid" 2>/dev/null) || return 1
  state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# start NAME CMD...: CMD in the namespace unless NAME runs already. The
# background job is not a process group leader (no job control in a
# script), so setsid and ip netns exec both exec in place: the recorded
# pid is the service's own, and its session id names all its children.
start() {
  local name=$1; shift
  running "$name" && return 0
  # 9>&-: the services must not hold up.sh's lock.
  setsid ip netns exec "$OS_NETNS" "$@" >>"$OS_STATE/logs/$name.out" 2>&1 </dev/null 9>&- &
  echo $! > "$OS_STATE/run/$name.pid"
}

# stop NAME...: TERM to each service's session, KILL to those still
# running after 20 s (all at once: the clients go before MariaDB and
# RabbitMQ only by the order of the signals).
stop() {
  local s pid deadline=$((SECONDS + 20)) left
  for s in "$@"; do
    pid=$(cat "$OS_STATE/run/$s.pid" 2>/dev/null) || continue
    running "$s" && { kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true; }
  done
  while [ "$SECONDS" -lt "$deadline" ]; do
    left=""
    for s in "$@"; do running "$s" && left="$left $s"; done
    [ -z "$left" ] && break
    sleep 0.5
  done
  for s in "$@"; do
    pid=$(cat "$OS_STATE/run/$s.pid" 2>/dev/null) || continue
    running "$s" && { kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; }
    rm -f "$OS_STATE/run/$s.pid"
  done
}

# wait_for WHAT SECONDS CMD...: polls CMD every half second until it
# succeeds; fails naming WHAT after SECONDS, or at once when WHAT is a
# service that has exited (with the end of its log).
wait_for() {
  local what=$1 deadline=$((SECONDS + $2)); shift 2
  while [ "$SECONDS" -lt "$deadline" ]; do
    "$@" >/dev/null 2>&1 && return 0
    if [ -f "$OS_STATE/run/$what.pid" ] && ! running "$what"; then
      echo "openstack: $what exited; the end of its logs:" >&2
      tail -n 20 "$OS_STATE/logs/$what".* >&2 || true
      return 1
    fi
    sleep 0.5
  done
  echo "openstack: $what did not come up in time" >&2
  return 1
}
# port_open PORT [ADDR]: something listens on ADDR:PORT in the namespace.
port_open() { ip netns exec "$OS_NETNS" bash -c "exec 3<>/dev/tcp/${2:-$OS_IP}/$1"; }
# http_ok URL: the URL answers (any status below 500) in the namespace.
http_ok() {
  local code
  code=$(ip netns exec "$OS_NETNS" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$1") || return 1
  [ "$code" -gt 0 ] && [ "$code" -lt 500 ]
}

# The services in start order; down.sh stops them in reverse.
OS_SERVICES="mariadb rabbitmq keystone placement glance-api neutron-server neutron-linuxbridge-agent
nova-api nova-conductor nova-scheduler nova-compute"
