"""A training loop fed through a DataLoader and dsmount.StagingLoader.

Run by bench/gpu (`go run ./bench gpu`), in two modes:

``gen``: write an ImageNet-like ImageFolder of real JPEGs, --images of
them in --classes directories (nNNNNNNNN, as ImageNet's synsets), each
300-500 px a side and about 60-150 KB (smooth shapes under luminance
noise, as photos are: chroma noise would vanish in JPEG's subsampling).
Each image is a function of (--seed, its index) alone, so --procs worker
processes make the same tree one process would. Prints {"images": N,
"bytes": B}.

``serve``: build the model once (torchvision --model, bf16 autocast,
channels_last, SGD; "tiny" is a small conv net for CPU smoke runs) and
then answer commands, one JSON object a line on stdin, with one JSON
object a line on stdout (after a first line {"ready": true, ...} that
says what the process found: device, GPU, versions). One long process
so that torch's import, CUDA's start and cuDNN's autotuning are paid once,
not once per pass; the driver drops caches and mounts between commands.

* {"op": "ceiling", "seconds": S, "warmup": K}: the step on a synthetic
  uint8 batch already on the device: the GPU alone.
* {"op": "pass", "root": DIR, "workers": W, "epoch": E, "declare": bool,
  "seconds": S, "max_batches": N, "warmup": K, "orders": bool}:
  ImageFolder(DIR) with dsmount.pil_loader, RandomResizedCrop(--crop),
  RandomHorizontalFlip, PILToTensor (uint8 crosses to the device and is
  normalised there); a DataLoader of W workers, pin_memory when CUDA is
  there, over a seeded permutation per epoch E (wrapped in
  dsmount.OrderedSampler when declare: its order is declared to the mount
  at DIR); wrapped in dsmount.StagingLoader. K batches of warm-up, then
  the measured window: S seconds or N batches, whichever ends first (0:
  no bound; both 0: the whole epoch).
* {"op": "quit"}.

Every pass checks that the dataset indices in the staged batches, in the
order they were staged, are the sampler's order (a prefix of it when
time-bounded); a whole epoch also checks each image came once. With
"orders" the reply carries both lists, for the driver to check itself.

Per pass: images/s over the window and the GPU wait share: the time the
step loop spent in next() waiting for a batch, over the window's time. The
step ends with a device synchronise, as a loop that logs its loss each
step does, so that wait and step time partition the window.

Usage:
  bench_gpu.py gen --out DIR [--images 16000] [--classes 100] [--procs N] [--seed 1]
  bench_gpu.py serve [--device auto|cuda|cpu] [--model resnet50] [--batch 256]
                     [--crop 224] [--classes 100] [--seed 1]
"""

import argparse
import json
import multiprocessing
import os
import random
import sys
import time
import traceback
import warnings

# More workers than CPUs is part of the sweep on a small machine.
warnings.filterwarnings("ignore", message="This DataLoader will create")


def make_image(rng, w, h):
    """One w x h RGB image: a tinted gradient, shapes, luminance noise."""
    from PIL import Image, ImageDraw
    base = Image.linear_gradient("L").resize((w, h)).convert("RGB")
    tint = Image.new("RGB", (w, h), tuple(rng.randrange(256) for _ in range(3)))
    img = Image.blend(base, tint, rng.uniform(0.3, 0.8))
    d = ImageDraw.Draw(img)
    for _ in range(rng.randrange(5, 40)):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        box = [x0, y0, min(w, x0 + rng.randrange(5, w // 2 + 6)), min(h, y0 + rng.randrange(5, h // 2 + 6))]
        (d.ellipse if rng.random() < 0.5 else d.rectangle)(box, fill=tuple(rng.randrange(256) for _ in range(3)))
    noise = Image.effect_noise((w, h), rng.uniform(40, 70)).convert("RGB")
    return Image.blend(img, noise, rng.uniform(0.35, 0.55))


def class_dir(c):
    return "n%08d" % (1440764 + 97 * c)


def gen_one(job):
    out, classes, seed, i = job
    rng = random.Random(seed * 1000003 + i)
    c = i % classes
    p = os.path.join(out, class_dir(c), "%s_%06d.JPEG" % (class_dir(c), i))
    make_image(rng, rng.randrange(300, 501), rng.randrange(300, 501)).save(p, "JPEG", quality=rng.randrange(88, 96))
    return os.path.getsize(p)


def gen(a):
    if a.classes < 1 or a.images < a.classes or a.procs < 1:
        print("bench_gpu.py gen: want 1 <= --classes <= --images and --procs >= 1", file=sys.stderr)
        return 2
    for c in range(a.classes):
        os.makedirs(os.path.join(a.out, class_dir(c)), exist_ok=True)
    jobs = [(a.out, a.classes, a.seed, i) for i in range(a.images)]
    if a.procs == 1:
        sizes = list(map(gen_one, jobs))
    else:
        with multiprocessing.get_context("fork").Pool(a.procs) as pool:
            sizes = pool.map(gen_one, jobs, chunksize=max(1, min(64, a.images // (4 * a.procs))))
    print(json.dumps({"images": a.images, "bytes": sum(sizes)}))
    return 0


class Server:
    """The model, its step and the passes (serve mode)."""

    def __init__(self, a):
        import torch
        import torch.nn as nn
        import torchvision
        self.torch, self.a = torch, a
        if a.device == "auto":
            a.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.dev = torch.device(a.device)
        self.cuda = self.dev.type == "cuda"
        torch.manual_seed(a.seed)
        if self.cuda:
            torch.backends.cudnn.benchmark = True
        if a.model == "tiny":
            model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(8, a.classes))
        else:
            model = getattr(torchvision.models, a.model)(num_classes=a.classes)
        self.model = model.to(self.dev, memory_format=torch.channels_last).train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
        self.mean = torch.tensor([0.485, 0.456, 0.406], device=self.dev).view(1, 3, 1, 1) * 255
        self.std = torch.tensor([0.229, 0.224, 0.225], device=self.dev).view(1, 3, 1, 1) * 255

    def hello(self):
        t = self.torch
        import torchvision
        info = {"ready": True, "device": str(self.dev), "cuda": self.cuda, "torch": t.__version__,
                "torchvision": torchvision.__version__, "cpus": os.cpu_count(), "model": self.a.model,
                "batch": self.a.batch, "crop": self.a.crop}
        if self.cuda:
            info["gpu"] = t.cuda.get_device_name(self.dev)
            info["cuda_version"] = t.version.cuda
        return info

    def step(self, x, y):
        """One training step on a uint8 NCHW batch x (on the device)."""
        t = self.torch
        x = x.float().sub_(self.mean).div_(self.std).contiguous(memory_format=t.channels_last)
        with t.autocast(device_type=self.dev.type, dtype=t.bfloat16):
            loss = t.nn.functional.cross_entropy(self.model(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        if self.cuda:
            t.cuda.synchronize(self.dev)

    def ceiling(self, cmd):
        t, a = self.torch, self.a
        x = t.randint(0, 256, (a.batch, 3, a.crop, a.crop), dtype=t.uint8, device=self.dev)
        y = t.randint(0, a.classes, (a.batch,), device=self.dev)
        for _ in range(int(cmd.get("warmup", 5))):
            self.step(x, y)
        seconds, n, t0 = float(cmd.get("seconds", 5)), 0, time.perf_counter()
        while True:
            self.step(x, y)
            n += a.batch
            el = time.perf_counter() - t0
            if el >= seconds:
                break
        return {"images": n, "seconds": el, "images_per_s": n / el, "wait_share": 0.0}

    def run_pass(self, cmd):
        t, a = self.torch, self.a
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms
        import dsmount
        from bench_pipeline import EpochSampler

        class Indexed(datasets.ImageFolder):
            def __getitem__(self, i):
                img, target = super().__getitem__(i)
                return img, target, i

        tf = transforms.Compose([transforms.RandomResizedCrop(a.crop), transforms.RandomHorizontalFlip(),
                                 transforms.PILToTensor()])
        ds = Indexed(cmd["root"], transform=tf, loader=dsmount.pil_loader)
        base = EpochSampler(len(ds), a.seed)
        base.set_epoch(int(cmd.get("epoch", 0)))
        want = list(base)
        sampler = base
        if cmd.get("declare"):
            sampler = dsmount.OrderedSampler(base, [p for p, _ in ds.samples], mountpoint=cmd["root"], strict=True,
                                             job="benchgpu")
            sampler.set_epoch(int(cmd.get("epoch", 0)))
        workers = int(cmd["workers"])
        warmup, seconds, max_batches = int(cmd.get("warmup", 0)), float(cmd.get("seconds", 0)), int(cmd.get("max_batches", 0))
        # A bounded pass drops the epoch's last, short batch: a new shape
        # would cost cuDNN a round of autotuning inside the window.
        loader = DataLoader(ds, batch_size=a.batch, sampler=sampler, num_workers=workers, pin_memory=self.cuda,
                            persistent_workers=False, drop_last=seconds > 0 or max_batches > 0,
                            timeout=120 if workers > 0 else 0)  # a stuck worker fails the pass, not the run
        staged = dsmount.StagingLoader(loader, self.dev)
        got, wait, busy, n, batches = [], 0.0, 0.0, 0, 0
        it = iter(staged)
        t_start = time.perf_counter() if warmup == 0 else None
        i = 0
        try:
            while True:
                t0 = time.perf_counter()
                try:
                    x, y, idx = next(it)
                except StopIteration:
                    break
                t1 = time.perf_counter()
                self.step(x, y)
                t2 = time.perf_counter()
                got.extend(idx.tolist())
                i += 1
                if i <= warmup:
                    if i == warmup:
                        t_start = time.perf_counter()
                    continue
                wait, busy, n, batches = wait + t1 - t0, busy + t2 - t1, n + x.shape[0], batches + 1
                el = time.perf_counter() - t_start
                if (seconds > 0 and el >= seconds) or (max_batches > 0 and batches >= max_batches):
                    break
        finally:
            it.close()  # ends the DataLoader's iterator: its workers exit
            del it
        el = time.perf_counter() - t_start if t_start is not None else 0.0
        if cmd.get("declare"):
            sampler.end()
        whole = len(got) == len(ds)  # a whole epoch: each image once
        res = {"images": n, "seconds": el, "images_per_s": n / el if el > 0 else 0.0,
               "wait_share": wait / (wait + busy) if wait + busy > 0 else 0.0, "batches": batches,
               "warmup_batches": min(i, warmup), "dataset": len(ds), "consumed": len(got), "whole_epoch": whole,
               "order_ok": got == want[:len(got)] and (not whole or sorted(got) == list(range(len(ds))))}
        if cmd.get("orders"):
            res["staged_order"], res["sampler_order"] = got, want
        return res


def serve(a):
    if a.batch < 1 or a.crop < 8 or a.classes < 1:
        print("bench_gpu.py serve: want --batch >= 1, --crop >= 8, --classes >= 1", file=sys.stderr)
        return 2
    # The script's directory (bench_pipeline's EpochSampler) and the checkout's python/ package.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    srv = Server(a)
    out = sys.stdout

    def reply(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    reply(srv.hello())
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            cmd = json.loads(line)
            op = cmd.get("op") if isinstance(cmd, dict) else None
            if op == "quit":
                return 0
            if op == "ceiling":
                res = srv.ceiling(cmd)
            elif op == "pass":
                res = srv.run_pass(cmd)
            else:
                raise ValueError("unknown command %r" % (line[:80],))
            res["ok"] = True
        except Exception as e:  # one pass's failure is reported, and the next pass runs
            traceback.print_exc(file=sys.stderr)
            res = {"ok": False, "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")}
        reply(res)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--out", required=True)
    g.add_argument("--images", type=int, default=16000)
    g.add_argument("--classes", type=int, default=100)
    g.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    g.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("serve")
    s.add_argument("--device", default="auto")
    s.add_argument("--model", default="resnet50")
    s.add_argument("--batch", type=int, default=256)
    s.add_argument("--crop", type=int, default=224)
    s.add_argument("--classes", type=int, default=100)
    s.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    return gen(a) if a.mode == "gen" else serve(a)


if __name__ == "__main__":
    sys.exit(main())
