"""The PyTorch peer of janus's GAN bench row (`cargo run --release --example bench -- --only gan`),
the `gan` example's step: a generator 2-128-128-2 and a discriminator 2-128-128-1 (nn.Linear,
ReLU, PyTorch's default init), the non-saturating loss through softplus, one Adam each
(lr 1e-3, betas 0.5, 0.999), batch 256 of a mixture of 8 Gaussians on a ring (radius 2,
std 0.05); one timed step = one discriminator update (generated batch detached) plus one
generator update. Uses shared/refbench's timing helpers, so its record matches the refbench's.

Run: python scripts/gan_torch.py --refbench ../shared/refbench --mode eager|compile
"""
import argparse
import math
import os
import sys

pre = argparse.ArgumentParser(add_help=False)
pre.add_argument("--refbench", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "refbench"))
known, rest = pre.parse_known_args()
sys.path.insert(0, os.path.abspath(known.refbench))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from common import base_parser, emit, step_summary, time_train_steps  # noqa: E402

Z, HIDDEN, BATCH, MODES, RADIUS, STD = 2, 128, 256, 8, 2.0, 0.05


def mlp(i, o):
    return nn.Sequential(nn.Linear(i, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, o))


def real_batch(n, g):
    k = torch.randint(0, MODES, (n,), generator=g)
    a = 2 * math.pi * k.float() / MODES
    centres = torch.stack([RADIUS * a.cos(), RADIUS * a.sin()], 1)
    return centres + STD * torch.randn(n, 2, generator=g)


def main():
    p = base_parser("gan / torch", ["eager", "compile"], default_steps=200)
    p.add_argument("--refbench", default=known.refbench)
    a = p.parse_args(rest)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    gen, disc = mlp(Z, 2), mlp(2, 1)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3, betas=(0.5, 0.999))
    g = torch.Generator().manual_seed(1)
    data = [(real_batch(BATCH, g), torch.randn(BATCH, Z, generator=g), torch.randn(BATCH, Z, generator=g))
            for _ in range(8)]

    def d_loss(real, z):
        fake = gen(z).detach()
        return F.softplus(-disc(real)).mean() + F.softplus(disc(fake)).mean()

    def g_loss(z):
        return F.softplus(-disc(gen(z))).mean()

    if a.mode == "compile":
        d_loss, g_loss = torch.compile(d_loss), torch.compile(g_loss)

    def step(k):
        real, zd, zg = data[k % len(data)]
        ld = d_loss(real, zd)
        opt_d.zero_grad(set_to_none=True)
        ld.backward()
        opt_d.step()
        lg = g_loss(zg)
        opt_g.zero_grad(set_to_none=True)
        lg.backward()
        opt_g.step()
        return float(ld.detach()) + float(lg.detach())

    tm = time_train_steps(step, a.warmup, a.steps, a.warmup_s)
    rec = {"workload": "gan", "framework": "torch", "mode": a.mode, "device": "cpu",
           "version": torch.__version__, "threads": torch.get_num_threads()}
    rec.update(step_summary(tm))
    emit(rec, a.json_out)


if __name__ == "__main__":
    main()
