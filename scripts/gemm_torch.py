"""torch.matmul on the LSTM LM step's GEMM shapes, timed as janus's bench times its own
(`bench -- --device cuda`, "GEMM" table): f32, TF32 off, 200 calls then a synchronise, the
median over 9 blocks of the time per call. Run by `scripts/gpu_suite.sh` (stage `gemm_torch`)
next to the bench, so the two tables come from one run.

Usage: python3 gemm_torch.py [--device cuda]
"""
import argparse
import statistics
import time

import torch

SHAPES = [(32, 65, 512), (32, 128, 512), (32, 128, 65), (128, 32, 512), (1024, 1024, 1024)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--blocks", type=int, default=9)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device(args.device)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(dev)}")
    print("\n| GEMM (f32, TF32 off), torch.matmul | µs | host µs | GFLOP/s |\n|---|---:|---:|---:|")
    for m, k, n in SHAPES:
        a = torch.randn(m, k, device=dev)
        b = torch.randn(k, n, device=dev)
        torch.matmul(a, b)
        torch.cuda.synchronize(dev)
        wall, host = [], []
        for _ in range(args.blocks):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                torch.matmul(a, b)
            t1 = time.perf_counter()
            torch.cuda.synchronize(dev)
            t2 = time.perf_counter()
            host.append((t1 - t0) * 1e6 / args.calls)
            wall.append((t2 - t0) * 1e6 / args.calls)
        us, hus = statistics.median(wall), statistics.median(host)
        print(f"| [{m}x{k}] @ [{k}x{n}] | {us:.2f} | {hus:.2f} | {2 * m * k * n / (us * 1e-6) / 1e9:.0f} |")


if __name__ == "__main__":
    main()
