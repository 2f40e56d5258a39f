#!/bin/bash
# wrkab.sh rounds: base (34924ab), new (HEAD), default (Kestrel's sockets transport) in turn; wrk 2 threads, 64 connections, 2 s warm-up, 5 s measured
for r in $(seq 1 $1); do for side in base new default; do
dll=/tmp/probe-new/out/probe.dll; m=spindle
[ $side = base ] && dll=/tmp/probe-base/out/probe.dll
[ $side = default ] && m=default
dotnet $dll $m 5090 >/dev/null 2>&1 &
for i in $(seq 1 50); do curl -s -o /dev/null http://127.0.0.1:5090/plaintext && break; sleep 0.1; done
pid=$(pgrep -f "probe.dll $m 5090" | head -1)
wrk -t2 -c64 -d2s http://127.0.0.1:5090/plaintext >/dev/null
wrk -t2 -c64 -d5s --latency http://127.0.0.1:5090/plaintext > /tmp/wrk-$side.txt
rps=$(awk '/Requests\/sec/{print $2}' /tmp/wrk-$side.txt); p99=$(awk '$1=="99%"{print $2}' /tmp/wrk-$side.txt)
echo "$r $side rps=$rps p99=$p99"
kill $pid; wait 2>/dev/null
done; done
