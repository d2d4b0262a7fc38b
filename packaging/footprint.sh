#!/bin/sh
# footprint.sh BINARY [EMULATOR]: binary size, and the broker's resident
# memory idle and under a publish load, per configuration, as published in
# docs/BENCHMARKS.md ("Footprint"). Each configuration gets a fresh data
# directory under ${BENCH_DIR:-/var/tmp}; the load is `ironbus bench`
# against the running broker: 4 producers, 256 B records, 10 s, durable
# acknowledgements. EMULATOR (qemu-aarch64-static) runs an arm binary; its
# RSS then includes the emulator's own and is labelled emulated.
set -eu
binary=$1
emulator=${2:-}
duration=${DURATION:-10s}
echo "binary $(basename "$binary"): $(stat -c %s "$binary") bytes"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
measure() {
	name=$1; shift
	dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ironbus-footprint.XXXXXX")
	log=$dir.log
	$emulator "$binary" serve --data-dir "$dir/data" --addr 127.0.0.1:0 "$@" 2>"$log" &
	pid=$!
	addr=
	for _ in $(seq 100); do
		addr=$(sed -n 's/.*msg=serving .*addr=\([^ ]*\).*/\1/p' "$log" | head -1)
		[ -n "$addr" ] && break
		sleep 0.1
	done
	[ -n "$addr" ] || { cat "$log"; kill "$pid"; exit 1; }
	sleep 3
	idle=$(rss "$pid")
	$emulator "$binary" bench --addr "$addr" --i-understand-this-is-live --duration "$duration" \
		--producers 4 --payload-bytes 256 --json >"$dir.bench" 2>&1 &
	bench=$!
	peak=0
	while kill -0 "$bench" 2>/dev/null; do
		now=$(rss "$pid"); [ "$now" -gt "$peak" ] && peak=$now
		sleep 0.5
	done
	wait "$bench" || { cat "$dir.bench"; }
	loaded_hwm=$(hwm "$pid")
	rate=$(sed -n 's/.*"msgs_per_sec":\([0-9.]*\).*/\1/p' "$dir.bench")
	kill -TERM "$pid"; wait "$pid" || true
	printf '%-22s idle %6d KiB  under load %6d KiB (VmHWM %6d KiB)  %s msgs/s\n' "$name" "$idle" "$peak" "$loaded_hwm" "${rate:-?}"
	rm -rf "$dir" "$log" "$dir.bench"
}
measure "balanced (default)"
measure "edge-tiny" --profile edge-tiny
measure "throughput" --profile throughput
