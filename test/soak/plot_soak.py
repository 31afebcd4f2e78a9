"""Plot test/soak's samples: a PNG of four panels sharing the time axis.

1. the daemon's RSS and Go heap (MB);
2. its goroutines;
3. its open file descriptors;
4. the cache directory: the index (badger) and the cached data (MB).

Every injected fault is drawn on every panel: a shaded span while it
lasts (an instant fault as a line), one colour per kind, named in the
legend; a lift of over a second (toxiproxy taking no new connection
while it removes a toxic) is hatched. A kill -9 restarts the daemon: its
series break there.

Reads the JSON test/soak writes (OUT.json). Needs matplotlib (Debian's
python3-matplotlib); draws with the Agg backend, no display.

Usage:
  plot_soak.py --in docs/soak.json --out docs/soak.png
"""

import argparse
import datetime
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from matplotlib.patches import Patch  # noqa: E402

COLOURS = {
    "stall": "tab:orange",
    "reset": "tab:purple",
    "latency": "tab:olive",
    "store-down": "tab:red",
    "cache-file": "tab:cyan",
    "kill": "black",
}


def parse_time(s):
    """An RFC 3339 time as Go writes it (up to nanoseconds; Python takes
    microseconds)."""
    head, _, rest = s.partition(".")
    if rest:
        digits = "".join(c for c in rest if c.isdigit())
        s = head + "." + digits[:6] + rest[len(digits):]
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))


def when(s, t0):
    """Seconds from t0 to the time s."""
    return (parse_time(s) - t0).total_seconds()


def lives(samples, key, scale=1.0):
    """One (x, y) run per daemon life, so that a restart breaks the line."""
    runs = {}
    for s in samples:
        if not s["up"]:
            continue
        runs.setdefault(s["generation"], ([], []))
        runs[s["generation"]][0].append(s["t"] / 60)
        runs[s["generation"]][1].append(s[key] * scale)
    return list(runs.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.inp) as f:
        res = json.load(f)
    samples = res["samples"]
    t0 = parse_time(res["started"])

    fig, axes = plt.subplots(4, 1, figsize=(11, 10), sharex=True)
    panels = [
        (axes[0], [("rss_bytes", "RSS", "tab:blue"), ("go_heap_bytes", "Go heap in use", "tab:green")], 1e-6, "MB"),
        (axes[1], [("goroutines", "goroutines", "tab:blue")], 1, "goroutines"),
        (axes[2], [("fds", "open fds", "tab:blue")], 1, "open fds"),
        (axes[3], [("cache_bytes", "cached data (data/, packs/)", "tab:blue"), ("badger_bytes", "index (badger)", "tab:green")],
         1e-6, "MB on disk"),
    ]
    for ax, lines, scale, ylabel in panels:
        for key, label, colour in lines:
            for i, (x, y) in enumerate(lives(samples, key, scale)):
                ax.plot(x, y, "-", color=colour, lw=1.2, marker=".", ms=3, label=label if i == 0 else None)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper left")

    end = max((s["t"] for s in samples), default=0)
    seen = set()
    for w in res["faults"]:
        start = when(w["start"], t0) / 60
        stop = when(w["end"], t0) / 60 if not w["end"].startswith("0001-") else end / 60
        colour = COLOURS.get(w["kind"], "grey")
        seen.add(w["kind"])
        for ax in axes:
            if stop - start > 0.05:
                ax.axvspan(start, stop, color=colour, alpha=0.18, lw=0)
            else:
                ax.axvline(start, color=colour, alpha=0.6, lw=1)
            lift = w.get("lift_start", "0001-")
            if not lift.startswith("0001-") and stop - when(lift, t0) / 60 > 1 / 60:
                # A lift of over a second: toxiproxy held new connections.
                ax.axvspan(when(lift, t0) / 60, stop, color=colour, alpha=0.35, lw=0, hatch="//", fill=False)
            if w["kind"] == "kill":
                ax.axvline(start, color=colour, alpha=0.8, lw=1, ls="--")
    handles = [Patch(color=COLOURS.get(k, "grey"), alpha=0.4, label=k) for k in COLOURS if k in seen]
    if handles:
        axes[0].legend(handles=axes[0].get_legend_handles_labels()[0] + handles, fontsize="x-small", loc="upper left", ncol=4)
    axes[-1].set_xlabel("minutes since the start of the work loop")
    reads = res["reads"]
    judg = res["judgement"]
    verdict = "PASS" if res["pass"] else "FAIL"
    fig.suptitle("dsmount soak, %s: %s; %d reads verified, %d wrong, %d errors (all explained: %s), %d faults"
                 % (res["config"]["duration"], verdict, reads["verified_reads"], judg["wrong_reads"],
                    judg["explained_errors"] + judg["unexplained_errors"], "yes" if judg["unexplained_errors"] == 0 else "no",
                    len(res["faults"])), fontsize="medium")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)


if __name__ == "__main__":
    main()
