#!/bin/bash
# wrkab.sh ROUNDS WRK_THREADS DLL:MODE... : each round starts every server in turn (`dotnet DLL MODE 5091`), warms it
# with a 2 s wrk run, then measures 5 s with `wrk -tWRK_THREADS -c64 --latency` and prints requests/s and p99.
# Section 6 of pairs.txt: a minimal Kestrel app taking `spindle` (Spindle's transport) or `default` (the sockets
# transport), 2 threads. Section 7: the same app, its pool's spin options set by mode (spindle, nospin, lowspin,
# noshare), 64 threads.
rounds=$1; threads=$2; shift 2
for r in $(seq 1 "$rounds"); do for side in "$@"; do
dll=${side%:*}; mode=${side##*:}
dotnet "$dll" "$mode" 5091 >/dev/null 2>&1 &
server=$!
for i in $(seq 1 50); do curl -s -o /dev/null http://127.0.0.1:5091/plaintext && break; sleep 0.1; done
wrk -t"$threads" -c64 -d2s http://127.0.0.1:5091/plaintext >/dev/null
out=$(wrk -t"$threads" -c64 -d5s --latency http://127.0.0.1:5091/plaintext)
echo "$r $mode rps=$(awk '/Requests\/sec/{print $2}' <<<"$out") p99=$(awk '$1=="99%"{print $2}' <<<"$out")"
kill "$server"; wait 2>/dev/null
done; done
