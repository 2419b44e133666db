# Port helpers for the scripts that run stock tools as server and client on one host
# (sourced, not run). The tools take a fixed -p port, so a script picks one that is
# free now and, should the server still fail to listen on it, picks again.
#
#   pick_port VAR        a random TCP port in 10000..29999 (below the ephemeral range,
#                        not perftest's default 18515) that nothing uses; sets VAR
#   wait_listen PORT PID 0 once something listens on PORT, 1 when PID has exited
#                        or 10 s have passed

pick_port() {
	local p _
	for _ in $(seq 200); do
		p=$((10000 + RANDOM % 20000))
		[ "$p" = 18515 ] && continue
		if command -v ss >/dev/null && ss -tanH "( sport = :$p or dport = :$p )" 2>/dev/null | grep -q .; then
			continue
		fi
		printf -v "$1" '%s' "$p"
		return 0
	done
	return 1
}

wait_listen() {
	local p=$1 pid=$2 _
	if ! command -v ss >/dev/null; then
		sleep 1
		kill -0 "$pid" 2>/dev/null
		return
	fi
	for _ in $(seq 200); do
		ss -ltnH "sport = :$p" 2>/dev/null | grep -q . && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
