"""Plot bench/pipeline's results: a PNG of one or two panels.

Left: images/s against DataLoader workers, one colour per system, the cold
epoch dashed and the hot one solid. Right: the half-cache series' hit rate
per epoch, one line per system, with its images/s in the legend. A panel
whose part of the results is empty is left out.

Reads the JSON bench/pipeline writes with --json. Needs matplotlib
(Debian's python3-matplotlib); draws with the Agg backend, no display.

Usage:
  plot_pipeline.py --in docs/pipeline.json --out docs/pipeline.png
"""

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

COLOURS = {
    "local": "black",
    "dsmount, declared": "tab:blue",
    "dsmount, not declared": "tab:cyan",
    "rclone, full VFS cache": "tab:orange",
    "s3fs, with its cache": "tab:red",
}


def systems_in(rows):
    out = []
    for r in rows:
        if r["system"] not in out:
            out.append(r["system"])
    return out


def plot_table(ax, res):
    rows = res["table"]
    for sys in systems_in(rows):
        pts = sorted((r["workers"], r["cold_images_per_s"], r["hot_images_per_s"]) for r in rows if r["system"] == sys)
        w = [p[0] for p in pts]
        c = COLOURS.get(sys)
        ax.plot(w, [p[2] for p in pts], "-o", color=c, label=sys + ", hot")
        ax.plot(w, [p[1] for p in pts], "--s", color=c, alpha=0.8, label=sys + ", cold")
    ax.set_xlabel("DataLoader workers")
    ax.set_ylabel("images/s")
    ax.set_xticks(sorted({r["workers"] for r in rows}))
    ax.set_ylim(bottom=0)
    ax.set_title("Cold (dashed) and hot (solid) epochs")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.13))


def plot_series(ax, s):
    for run in s["runs"]:
        eps = run["epochs"]
        rates = ", ".join("%.0f" % e["images_per_s"] for e in eps)
        ax.plot([e["epoch"] for e in eps], [e["hit_rate"] for e in eps], "-o", color=COLOURS.get(run["system"]),
                label="%s (images/s: %s)" % (run["system"], rates))
    ax.set_xlabel("epoch")
    ax.set_ylabel("hit rate (1 - store bytes / dataset bytes)")
    ax.set_xticks(range(1, s["epochs"] + 1))
    ax.set_ylim(-0.05, 1.0)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_title("Cache of half the dataset, %d workers" % s["workers"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.13))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.inp) as f:
        res = json.load(f)
    panels = []
    if res.get("table"):
        panels.append(lambda ax: plot_table(ax, res))
    if res.get("series") and res["series"].get("runs"):
        panels.append(lambda ax: plot_series(ax, res["series"]))
    if not panels:
        print("plot_pipeline.py: nothing to plot in %s" % a.inp, file=sys.stderr)
        return 1
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 6.2), squeeze=False)
    for p, ax in zip(panels, axes[0]):
        p(ax)
    fig.suptitle("%d JPEGs, %.0f MB, S3 +%d ms; %s" % (res["images"], res["bytes"] / 1e6, res["latency_ms"], res["date"]),
                 fontsize="small")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
