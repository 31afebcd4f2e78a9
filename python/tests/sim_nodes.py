"""Simulated nodes for the locality split (dsmount.locality), beside
``go run ./bench nodes``'s real mounts.

    sim_nodes.py hit  [--files 1281167] [--nodes 4,16,64] [--batch 32,256]
                      [--ranks-per-node 1] [--epochs 3] [--seed 0]
    sim_nodes.py cost [--files 1281167] [--nodes 64] [--batch 256]

``hit`` prints, as JSON lines, the hit rate per epoch of N nodes, each
caching 1/N of the files (equal sizes), with the locality split and with
today's DistributedSampler shares. A node's cache is modelled on the
``order`` policy with the next epoch declared: a miss is admitted while
there is room, and when full only if the node will read the file in its
next epoch, in place of a cached file it won't; otherwise it is refused.
The next epoch's reads are what the split of the same bitmaps gives for
it, as the sampler declares them.

``cost`` times what one rank does at the start of an epoch with N ranks
simulated in this process: the exchange of the nodes' bitmaps (each
compressed and pickled, as the sampler's all_gather_object sends it, and
unpickled) and its split of the epoch and of the next (which it declares
with it), and reports the peak of the memory allocated for it
(tracemalloc, which numpy reports to; the epoch's order is a numpy array
that torch draws the permutation into).
"""

import argparse
import json
import pickle
import sys
import time
import tracemalloc

import numpy as np

from dsmount import locality as loc


def shares(n, world, nodes_of, order, num, batch, locality, bitmaps):
    """For each node, the sample of every position it reads, in order."""
    nodes = max(nodes_of) + 1
    per_node = np.bincount(np.asarray(nodes_of), minlength=nodes)
    if not locality:
        pos = np.arange(len(order))
        node = np.asarray(nodes_of)[pos % world]
        return [order[node == m] for m in range(nodes)]
    home = loc.home_nodes(np.arange(n), nodes)
    pref = loc.holders(n, home, bitmaps)
    reads = [[] for _ in range(nodes)]
    for _, lo, _, take in loc.batches(order, batch, per_node, pref, home):
        for m in range(nodes):
            reads[m].append(order[lo + np.flatnonzero(take == m)])
    return [np.concatenate(r) for r in reads]


def simulate(n, nodes, per_node, batch, epochs, seed, locality):
    world = nodes * per_node
    nodes_of = [r // per_node for r in range(world)]
    cap = n // nodes
    cached = [np.zeros(n, dtype=bool) for _ in range(nodes)]
    count = [0] * nodes
    hits = []
    for e in range(epochs):
        bitmaps = [np.packbits(c, bitorder="little").tobytes() for c in cached]
        order, num = loc.distributed_order(n, world, seed, e)
        now = shares(n, world, nodes_of, order, num, batch, locality, bitmaps)
        nxt_order, _ = loc.distributed_order(n, world, seed, e + 1)
        nxt = shares(n, world, nodes_of, nxt_order, num, batch, locality, bitmaps)
        hit = 0
        for m in range(nodes):
            need = np.zeros(n, dtype=bool)
            need[nxt[m]] = True
            c = cached[m]
            was = c[now[m]]
            hit += int(np.count_nonzero(was))
            # Evictable: cached, not needed next epoch; taken as misses come.
            spare = list(np.flatnonzero(c & ~need))
            for s in now[m][~was]:
                if c[s]:
                    continue  # read twice this epoch (padding)
                if count[m] < cap:
                    c[s] = True
                    count[m] += 1
                elif need[s] and spare:
                    c[spare.pop()] = False
                    c[s] = True
        hits.append(hit / len(order))
    return hits


def cmd_hit(a):
    for nodes in a.nodes:
        for batch in a.batch:
            for locality in (True, False):
                t0 = time.monotonic()
                hits = simulate(a.files, nodes, a.ranks_per_node, batch, a.epochs, a.seed, locality)
                print(json.dumps({"files": a.files, "nodes": nodes, "ranks_per_node": a.ranks_per_node, "batch": batch,
                                  "locality": locality, "hit_rate": [round(h, 4) for h in hits],
                                  "seconds": round(time.monotonic() - t0, 1)}), flush=True)


def cmd_cost(a):
    n, nodes, batch = a.files, a.nodes[0], a.batch[0]
    home = loc.home_nodes(np.arange(n), nodes)
    bitmaps = [np.packbits(home == m, bitorder="little").tobytes() for m in range(nodes)]
    del home
    sent = [pickle.dumps(("host%d:/mnt/data" % m, loc.deflate(bm))) for m, bm in enumerate(bitmaps)]
    del bitmaps

    def epoch_start():
        got = [pickle.loads(s) for s in sent]  # what all_gather_object hands every rank
        rank_nodes, _ = loc.node_index([g[0] for g in got])
        t1 = time.monotonic()
        # What the sampler does: one plan, the epoch's split and the next's.
        plan = loc.Plan(n, rank_nodes, loc.Deflated([g[1] for g in got]))
        for e in (1, 2):
            order, num = loc.distributed_order(n, nodes, 0, e)
            mine = plan.split(order, num, batch, 0)
        return t1, mine

    import torch  # noqa: F401 - imported before, as a training process has it
    # Timed alone (tracemalloc slows every allocation), then measured.
    t0 = time.monotonic()
    t1, mine = epoch_start()
    t2 = time.monotonic()
    tracemalloc.start()
    epoch_start()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({"files": n, "ranks": nodes, "batch": batch, "received_bytes": sum(len(s) for s in sent),
                      "exchange_seconds": round(t1 - t0, 3), "split_seconds": round(t2 - t1, 3),
                      "peak_bytes": peak, "samples": len(mine)}))


def ints(s):
    return [int(x) for x in s.split(",")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["hit", "cost"])
    ap.add_argument("--files", type=int, default=1281167)
    ap.add_argument("--nodes", type=ints, default=None)
    ap.add_argument("--batch", type=ints, default=None)
    ap.add_argument("--ranks-per-node", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.what == "hit":
        a.nodes, a.batch = a.nodes or [4, 16, 64], a.batch or [32, 256]
        cmd_hit(a)
    else:
        a.nodes, a.batch = a.nodes or [64], a.batch or [256]
        cmd_cost(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
