# Shared by the checks that run inside an rxe-vm guest (stock-tools-check, interop-check):
# server/client pairs under a time limit, PASS/FAIL lines, a count. Sourced, not run.
# The caller sets `check_name` (the log folder's prefix) and `check_label` (its own name).

[[ ${VERBS4J_IN_VM:-} == 1 ]] || { echo "$check_label: run this inside scripts/rxe-vm" >&2; exit 2; }
dev=${VERBS4J_RXE_DEVICE:-rxe0}
gid=${VERBS4J_GID_INDEX:?}
addr=${VERBS4J_ADDR:?}
peer=${VERBS4J_PEER:?}
node=${VERBS4J_NODE:-1}
nodes=${VERBS4J_NODES:-1}
logs="${VERBS4J_RESULTS:-/tmp}/$check_name-node$node"
mkdir -p "$logs"

# The transport the device reports (InfiniBand for rxe0, iWARP for siw0): the checks choose
# what can apply from it, never from the device's name.
transport=$(ibv_devinfo -d "$dev" 2>/dev/null | sed -n 's/^[[:space:]]*transport:[[:space:]]*\([A-Za-z]*\).*/\1/p' | head -n1)
iwarp=false
[[ $transport == iWARP ]] && iwarp=true

limit=60           # seconds per tool run; a healthy run takes 1-3 s here
passed=0 failed=0 skipped=0
failures=() skips=() retried=()

# Roles: with one node this VM runs both ends; with two, node 1 serves and node 2 connects.
serve=true connect=true
if ((nodes == 2)); then
  if ((node == 1)); then connect=false; else serve=false; fi
fi

record() {   # name ok(0/1) seconds detail
  if (($2 == 0)); then
    passed=$((passed + 1)); printf 'PASS %-22s %5.1f s\n' "$1" "$3"
  else
    failed=$((failed + 1)); failures+=("$1"); printf 'FAIL %-22s %5.1f s  %s\n' "$1" "$3" "$4"
  fi
}

# skip NAME REASON: a check that cannot apply to this device; counted apart, never as passed.
skip() {
  skipped=$((skipped + 1)); skips+=("$1"); printf 'SKIP %-22s        %s\n' "$1" "$2"
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

show_tail() {   # file: the last lines of a failed tool's output, indented
  [[ -s $1 ]] && tail -n 6 "$1" | sed 's/^/     | /'
}

# Waits (up to $limit s) until something listens on TCP port $1 locally, or the process $2 has ended.
wait_listening() {
  local deadline=$((SECONDS + limit))
  while ((SECONDS < deadline)); do
    [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# Runs a client until it connects: the server may not be up yet (the other VM boots in parallel).
run_client() {   # log local_server_pid|"" cmd...
  local log=$1 local_server=$2 status deadline=$((SECONDS + limit))
  shift 2
  local refused="couldn't connect|connection refused|unable to connect|connect error|REJECTED|UNREACHABLE|failed to connect|unexpected cm event bl blka 8\b|function rdma_connect failed"
  local pid
  while true; do
    timeout "$limit" "$@" > "$log" 2>&1 &
    pid=$!
    # A client that said its connection was refused gets 2 s to exit, then is stopped: on iWARP
    # the stock rping client prints "rdma_connect: Connection refused" and then hangs.
    while kill -0 "$pid" 2>/dev/null; do
      if grep -Eqi "$refused" "$log"; then
        sleep 2
        kill "$pid" 2>/dev/null
        break
      fi
      sleep 0.2
    done
    wait "$pid"
    status=$?
    ((status == 0)) && return 0
    # Only a refused connection is worth another try; anything else is the verdict.
    # (perftest over rdma_cm reports a refusal as "Unexpected CM event bl blka 8": 8 = REJECTED,
    # and on iWARP, where rdma_connect itself fails with ECONNREFUSED, as "Function rdma_connect
    # failed".)
    grep -Eqi "$refused" "$log" || return "$status"
    # A server in this VM that has already given up will never accept.
    [[ -n $local_server ]] && ! kill -0 "$local_server" 2>/dev/null && return "$status"
    ((SECONDS < deadline)) || return "$status"
    { echo "---- refused attempt, status $status, $(date +%T.%N)"; cat "$log"; } >> "$log.refused"
    sleep 0.5
  done
}

# pair NAME PORT CLIENT_REGEX SERVER_REGEX -- SERVER... -- CLIENT...
# A pass needs both ends to exit 0 and each regex to match its end's output (an empty
# SERVER_REGEX: the server prints nothing to check, its status alone counts).
#
# pair_retries (0 unless the caller sets it): how many more times a failed pair runs. Only
# stock-tools-check sets it, for pairs in which both ends are stock tools on the kernel's own
# device: there neither end is verbs4j's code, and one CI run saw stock ib_write_lat -R on siw0
# fail once (server ENOSPC, client SIGSEGV) and pass in the next four runs. A retried failure
# is printed with its output and named in the summary; a pair that fails every time fails.
# With two nodes the decision to retry is taken jointly: after each attempt both ends exchange
# their outcome (agree) and both run again when either failed. Each end deciding alone could
# leave them out of step: after a failure on one end only, the end that passed would go on to
# the next pair while the other retried against it, and later pairs would wait out their limits.
pair_retries=0
pair() {
  local name=$1 attempt=0 mine theirs
  while true; do
    pair_once "$@"
    mine=$?
    theirs=$mine
    if ((nodes == 2 && pair_retries > 0)); then
      theirs=$(agree "$name" "$attempt" "$mine")
    fi
    ((mine == 0)) && [[ $theirs == 0 ]] && break
    # The other end never reported: it is lost, and another attempt would run alone.
    [[ $theirs == none ]] && pair_detail="${pair_detail:-this end passed}; the other node never reported its end of attempt $attempt"
    ((attempt < pair_retries)) && [[ $theirs != none ]] || break
    attempt=$((attempt + 1))
    retried+=("$name")
    ((mine == 0)) && pair_detail="this end passed, the other node's end failed (its log has the detail)"
    printf 'RETRY %-21s attempt %d failed: %s\n' "$name" "$attempt" "$pair_detail"
    local end
    for end in server client; do
      [[ $end == server ]] && ! $serve && continue
      [[ $end == client ]] && ! $connect && continue
      show_tail "$logs/$name.$end.log"
      mv -f "$logs/$name.$end.log" "$logs/$name.$end.attempt$attempt.log" 2>/dev/null
    done
  done
  if ((mine == 0)) && [[ $theirs != none ]]; then
    # Both ends passed, or this one did and the failure is the other node's to report.
    record "$name" 0 "$pair_seconds" ""
    return 0
  fi
  record "$name" 1 "$pair_seconds" "$pair_detail"
  $serve && show_tail "$logs/$name.server.log"
  $connect && show_tail "$logs/$name.client.log"
  return 1
}

# agree NAME ATTEMPT STATUS: with two nodes, tells the other node this end's status for one
# attempt of a pair and prints the other's (0 or 1), or "none" when it has not come within
# $limit s. The two nodes share the results folder (9p, cache=none); scripts/rxe-vm empties
# .agree there before it boots them.
agree() {
  local dir="${VERBS4J_RESULTS:-/tmp}/.agree/$check_name" file other deadline=$((SECONDS + limit))
  mkdir -p "$dir"
  file="$dir/$1.$2.node$node"
  other="$dir/$1.$2.node$((3 - node))"
  echo "$3" > "$file.tmp" && mv -f "$file.tmp" "$file"
  while [[ ! -s $other ]] && ((SECONDS < deadline)); do sleep 0.2; done
  if [[ -s $other ]]; then
    [[ $(<"$other") == 0 ]] && echo 0 || echo 1
  else
    echo none
  fi
}

# One run of a pair: returns 0 when it passed, else 1 with pair_detail set; sets pair_seconds.
pair_once() {
  local name=$1 port=$2 expect=$3 server_expect=$4
  shift 5
  local server=() client=()
  while (($#)) && [[ $1 != -- ]]; do server+=("$1"); shift; done
  shift
  client=("$@")
  local start server_pid= server_status=0 client_status=0 detail=
  local slog="$logs/$name.server.log" clog="$logs/$name.client.log"
  start=$(now)
  pair_detail=
  rm -f "$slog" "$clog"
  if $serve; then
    timeout "$limit" "${server[@]}" > "$slog" 2>&1 &
    server_pid=$!
    # TCP-based tools (port > 0) can be waited for; rdma_cm listeners cannot, the client retries.
    if $connect && ((port > 0)) && ! wait_listening "$port" "$server_pid"; then
      detail="server never listened on port $port"
    fi
  fi
  if $connect && [[ -z $detail ]]; then
    run_client "$clog" "$server_pid" "${client[@]}"
    client_status=$?
  fi
  if [[ -n $server_pid ]]; then
    if [[ -n $detail ]]; then kill "$server_pid" 2>/dev/null; fi
    wait "$server_pid"
    server_status=$?
  fi
  if [[ -z $detail ]]; then
    if ((server_status != 0)); then
      detail="server exited with $server_status"
    elif ((client_status != 0)); then
      detail="client exited with $client_status"
    elif $connect && ! grep -Eq "$expect" "$clog"; then
      detail="client output lacks /$expect/"
    elif $serve && [[ -n $server_expect ]] && ! grep -Eq "$server_expect" "$slog"; then
      detail="server output lacks /$server_expect/"
    fi
  fi
  pair_seconds=$(since "$start")
  if [[ -n $detail ]]; then
    pair_detail=$detail
    return 1
  fi
  return 0
}

# refused NAME EXPECT_REGEX CMD...: one command that must fail (non-zero status, not a timeout)
# saying EXPECT_REGEX: what the device cannot do is refused, not silently done wrong.
refused() {
  local name=$1 expect=$2 start status detail=
  shift 2
  start=$(now)
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  status=$?
  if ((status == 0)); then detail="succeeded, but should have been refused"
  elif ((status == 124)); then detail="timed out instead of being refused"
  elif ! grep -Eq "$expect" "$logs/$name.log"; then detail="output lacks /$expect/"
  fi
  record "$name" "$([[ -z $detail ]]; echo $?)" "$(since "$start")" "$detail"
  [[ -n $detail ]] && show_tail "$logs/$name.log"
}

# single NAME EXPECT_REGEX CMD...: one command, its exit status and its output.
single() {
  local name=$1 expect=$2 start status detail=
  shift 2
  start=$(now)
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  status=$?
  if ((status != 0)); then detail="exited with $status"
  elif ! grep -Eq "$expect" "$logs/$name.log"; then detail="output lacks /$expect/"
  fi
  record "$name" "$([[ -z $detail ]]; echo $?)" "$(since "$start")" "$detail"
  [[ -n $detail ]] && show_tail "$logs/$name.log"
}

summary() {
  echo "$check_label (node $node, $transport): $passed passed, $failed failed${failures:+ (${failures[*]})}, $skipped skipped${skips:+ (${skips[*]})}${retried:+, retried after a failure: ${retried[*]}}"
  ((failed == 0))
}
