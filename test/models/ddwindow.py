#!/usr/bin/env python3
"""Model of sequential readahead over a bandwidth-shared store.

Why: dd over a cold 256 MiB file through dsmount reaches about 0.78 of what
the store gives to 16 parallel ranged GETs (go run ./bench order
--isolate-backend --skip-small). A debug timeline of the daemon's fetches
shows the window's chunks arriving together in waves, each new wave's GETs
spending their latency with the store idle. This model checks that story
and compares window rules before building one.

Model: chunks in flight share the store's rate C evenly, each capped at the
per-connection rate; a GET delivers nothing for the first `lat` seconds.
The reader consumes a chunk as soon as it has arrived (dd through FUSE is
far faster than the store). Window rules:

  chunks  N chunks past the one being read (readahead.MaxChunks today)
  bytes   at most B MiB still to arrive and T MiB fetched ahead of the
          reader (a bandwidth-delay window; needs the fetch's progress)

Usage: python3 test/models/ddwindow.py   (prints ratios to one connection)
"""

MIB = 1.048576  # MB


def simulate(rule, n_chunks=64, chunk_mb=4 * MIB, store_mbs=400.0, conn_mbs=100.0,
             latency=0.020, window_chunks=8, window_mb=32 * MIB, ahead_mb=64 * MIB, dt=0.0002):
    """Seconds to read the file under the given window rule."""
    t = 0.0
    inflight = {}  # chunk -> [start, MB left]
    arrived = set()
    read = 0       # chunks consumed
    asked = 0      # chunks requested so far: [0, asked)

    def top_up():
        nonlocal asked
        while asked < n_chunks:
            if rule == "chunks":
                if asked >= read + 1 + window_chunks:
                    return
            else:
                left = sum(mb for _, mb in inflight.values())
                if left + chunk_mb > window_mb or (asked - read + 1) * chunk_mb > ahead_mb:
                    return
            inflight[asked] = [t, chunk_mb]
            asked += 1

    inflight[0] = [t, chunk_mb]  # the reader's own miss
    asked = 1
    top_up()
    while read < n_chunks:
        active = [c for c, (start, _) in inflight.items() if t - start >= latency]
        if active:
            share = min(conn_mbs, store_mbs / len(active))
            for c in active:
                inflight[c][1] -= share * dt
                if inflight[c][1] <= 0:
                    del inflight[c]
                    arrived.add(c)
        while read in arrived:
            read += 1
        top_up()
        t += dt
    return t


def main():
    one_conn = 86.0  # MB/s: what one connection through the bench's proxy gets
    size = 64 * 4 * MIB
    print("store MB/s   8 chunks  16 chunks  bytes 32/64 MiB  perfect pipeline  (x one connection)")
    for store in (350.0, 400.0, 450.0):
        r8 = size / simulate("chunks", store_mbs=store) / one_conn
        r16 = size / simulate("chunks", store_mbs=store, window_chunks=16) / one_conn
        rb = size / simulate("bytes", store_mbs=store) / one_conn
        ideal = size / (0.020 + size / store) / one_conn
        print(f"{store:10.0f} {r8:9.2f} {r16:10.2f} {rb:16.2f} {ideal:17.2f}")


if __name__ == "__main__":
    main()
