#!/bin/sh
# exp/ssai.sh V OUT: one old-build job (fresh buffers per size) in a fresh netns with tcp_slow_start_after_idle=V
unshare -n sh -c "ip link set lo up && sysctl -q net.ipv4.tcp_slow_start_after_idle=$1 && sysctl -q -w net.ipv4.tcp_rmem='4096 131072 33554432' net.ipv4.tcp_wmem='4096 16384 4194304' && BB=build-old sh exp/pos.sh tcp 2 auto,ring,rd 32M 64M 1 1 9 $2"
