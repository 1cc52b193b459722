"""A stand-in for one node of a multi-node server: replays a real log for its rank.

Usage: standin_node.py RANK=LOG [RANK=LOG ...] -- SERVER ARGV (with --node-rank R in it).
The node whose rank has a ``.fail`` log prints it and exits 1 (it died); the others print
their log and then block, as a rank waiting in NCCL for a peer that never comes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main(args: list[str]) -> int:
    split = args.index("--")
    logs = dict(a.split("=", 1) for a in args[:split])
    server = args[split + 1 :]
    rank = server[server.index("--node-rank") + 1]
    print(f"stand-in node rank {rank}: {' '.join(server[:3])} ...", flush=True)
    log = Path(logs[rank])
    time.sleep(0.5 + 0.5 * int(rank))  # the nodes start at their own pace
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        print(line, flush=True)
    if log.suffix == ".fail":
        return 1
    time.sleep(600)  # waiting in NCCL init for the rank that died
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
