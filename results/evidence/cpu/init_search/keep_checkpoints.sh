#!/bin/bash
# keep_checkpoints.sh RUN: copy each new RUN/C/checkpoint.pt into RUN/snaps/t<mtime>/
last=""
while true; do
  f=$1/C/checkpoint.pt
  if [ -f "$f" ]; then
    m=$(stat -c %.3Y "$f")
    if [ "$m" != "$last" ]; then
      d=$1/snaps/t$m; mkdir -p "$d"; cp "$f" "$d/checkpoint.pt"; last=$m
    fi
  fi
  sleep 1
done
