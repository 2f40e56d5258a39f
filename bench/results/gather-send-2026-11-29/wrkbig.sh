#!/bin/bash
# wrkbig.sh rounds path: before (probe-base), after (probe), default (sockets) alternating; rps, p99, send syscalls per request
rounds=$1; path=$2
for r in $(seq 1 $rounds); do for side in before after default; do
dll=/tmp/probe/bin/Release/net10.0/probe.dll; m=spindle
[ $side = before ] && dll=/tmp/probe-base/bin/Release/net10.0/probe.dll
[ $side = default ] && m=default
dotnet $dll $m 5090 >/dev/null 2>&1 &
for i in $(seq 1 50); do curl -s -o /dev/null http://127.0.0.1:5090$path && break; sleep 0.1; done
pid=$(pgrep -f "probe.dll $m 5090" | head -1)
wrk -t${WT:-2} -c64 -d3s http://127.0.0.1:5090$path >/dev/null
wrk -t${WT:-2} -c64 -d6s --latency http://127.0.0.1:5090$path > /tmp/wrk-$side.txt &
sleep 1
perf stat -x, -e syscalls:sys_enter_sendto,syscalls:sys_enter_sendmsg,task-clock -p $pid -- sleep 4 2>/tmp/ps-$side.txt >/dev/null
wait %2 2>/dev/null
rps=$(awk '/Requests\/sec/{print $2}' /tmp/wrk-$side.txt); p99=$(awk '$1=="99%"{print $2}' /tmp/wrk-$side.txt)
st=$(awk -F, '/sendto/{print $1}' /tmp/ps-$side.txt); sm=$(awk -F, '/sendmsg/{print $1}' /tmp/ps-$side.txt); tc=$(awk -F, '/task-clock/{print $1}' /tmp/ps-$side.txt)
python3 -c "n=float('$rps')*4; print('$r $side rps=$rps p99=$p99 sendto/req=%.2f sendmsg/req=%.2f cpu_us/req=%.1f' % ($st/n, $sm/n, $tc*1000/n))"
kill $pid; wait 2>/dev/null
done; done
