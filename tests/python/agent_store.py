"""torchrun's way of starting ranks, without torchrun (Debian's torch 1.13 torchrun fails on
Python 3.11 before it starts a worker): this driver plays the elastic agent. It hosts a
torch.distributed.TCPStore at MASTER_PORT, as the agent does, and starts 2 ranks of a small
training script with the environment torchrun gives (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True,
TORCHELASTIC_RESTART_COUNT), twice, as a restarted job would. Both runs must train (the ranks
join the agent's store as clients and the second run's arrivals are counted apart from the
first's). A plain process (run.sh NPROC 0).
"""

import os
import socket
import subprocess
import sys
from datetime import timedelta

import torch.distributed as dist

WORKER = r'''
import sys, torch, zt
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
e = zt.initialize(m, config={"zero": {"stage": 3}, "plugins": {"comm": "comm_ucx",
                  "shard": "shard_bucket", "optimizer": "optim_hybrid_adam"}})
for _ in range(2):
    e.backward(e.loss(torch.randn(2, 4), torch.randn(2, 2)))
    assert e.step() is not None
print(f"rank {e.rank} of {e.world_size}: trained 2 steps")
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent_store(port, world):
    """The store torchrun's agent hosts, which its workers join as clients."""
    return dist.TCPStore("127.0.0.1", port, world + 1, True, timedelta(seconds=60),
                         wait_for_workers=False)


def torchrun_env(rank, world, port, restart=0, **more):
    """The environment torchrun gives rank `rank` of `world` on one host."""
    return dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT=str(restart),
                **more)


def main():
    port = free_port()
    agent = agent_store(port, 2)
    for restart in range(2):
        ranks = []
        for rank in range(2):
            env = torchrun_env(rank, 2, port, restart)
            ranks.append(subprocess.Popen([sys.executable, "-c", WORKER], env=env))
        codes = [r.wait(timeout=120) for r in ranks]
        if codes != [0, 0]:
            print(f"agent_store: run {restart}: the ranks exited with {codes}", file=sys.stderr)
            return 1
    del agent
    print("agent_store: 2 runs of 2 ranks trained on the agent's store")
    return 0


if __name__ == "__main__":
    sys.exit(main())
