"""Write a Caltech-256-like image folder: real JPEG files, seeded.

--classes class directories (NNN.classNNN) hold --images JPEGs in all,
each of its own size (100-600 px a side) and content (smooth gradients,
blocks and noise, so the JPEGs are tens to hundreds of KB, as photos
are). Run by bench/pipeline. Needs Pillow. Prints
{"images": N, "bytes": B} on stdout.

Usage:
  gen_images.py --out DIR [--classes 256] [--images 6000] [--seed 1]
"""

import argparse
import json
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFilter


def one(rng, w, h):
    base = Image.linear_gradient("L").resize((w, h)).convert("RGB")
    tint = Image.new("RGB", (w, h), tuple(rng.randrange(256) for _ in range(3)))
    img = Image.blend(base, tint, rng.uniform(0.3, 0.8))
    d = ImageDraw.Draw(img)
    for _ in range(rng.randrange(5, 40)):
        x0, y0 = rng.randrange(w), rng.randrange(h)
        box = [x0, y0, min(w, x0 + rng.randrange(5, w // 2 + 6)), min(h, y0 + rng.randrange(5, h // 2 + 6))]
        fill = tuple(rng.randrange(256) for _ in range(3))
        (d.ellipse if rng.random() < 0.5 else d.rectangle)(box, fill=fill)
    # Texture: photos are not flat. Noise at a random share of the image.
    noise = Image.effect_noise((w, h), rng.uniform(10, 60)).convert("RGB")
    img = Image.blend(img, noise, rng.uniform(0.15, 0.5))
    if rng.random() < 0.3:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.5, 2)))
    return img


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--classes", type=int, default=256)
    ap.add_argument("--images", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.classes < 1 or a.images < a.classes:
        print("gen_images.py: want 1 <= --classes <= --images", file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    total = 0
    for i in range(a.images):
        c = i % a.classes
        d = os.path.join(a.out, "%03d.class%03d" % (c + 1, c + 1))
        os.makedirs(d, exist_ok=True)
        w, h = rng.randrange(100, 601), rng.randrange(100, 601)
        p = os.path.join(d, "%03d_%05d.jpg" % (c + 1, i))
        one(rng, w, h).save(p, "JPEG", quality=rng.randrange(80, 97))
        total += os.path.getsize(p)
    print(json.dumps({"images": a.images, "bytes": total}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
