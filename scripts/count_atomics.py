#!/usr/bin/env python3
"""Instructions and atomic operations per call of a loop binary, under callgrind.

Usage: scripts/count_atomics.py BINARY CALLS [ARGS...]
Runs `BINARY CALLS ARGS...` and `BINARY CALLS/10 ARGS...` under
`valgrind --tool=callgrind --dump-instr=yes` and prints the difference per call, so start-up
and warm-up cancel out. Atomic operations are the lock-prefixed instructions of BINARY's
disassembly (objdump), counted where executed. valgrind runs the AVX2 code paths.
Example: scripts/count_atomics.py target/release/examples/replay_loop 50000 act janus
"""
import subprocess
import sys
import tempfile


def lock_addresses(binary):
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary], capture_output=True, text=True, check=True)
    locks = set()
    for line in dis.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[1].startswith("lock"):
            locks.add(int(parts[0].strip().rstrip(":"), 16))
    return locks


def counts(binary, calls, args, locks):
    with tempfile.NamedTemporaryFile(suffix=".callgrind") as out:
        cmd = ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--callgrind-out-file=" + out.name, binary, str(calls)]
        subprocess.run(cmd + args, capture_output=True, check=True)
        total = atomics = cur = 0
        call_line = False
        for line in open(out.name):
            if line.startswith("calls="):
                call_line = True  # the next cost line is the call's inclusive cost
                continue
            if not (line.startswith("0x") or line[:1] in "+-*"):
                continue
            parts = line.split()
            pos = parts[0]
            if pos.startswith("0x"):
                cur = int(pos, 16)
            elif pos[0] in "+-":
                cur += int(pos)
            if call_line:
                call_line = False
                continue
            cost = int(parts[-1])
            total += cost
            if cur in locks:
                atomics += cost
        return total, atomics


def main():
    binary, calls, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    locks = lock_addresses(binary)
    t1, a1 = counts(binary, calls, args, locks)
    t0, a0 = counts(binary, calls // 10, args, locks)
    n = calls - calls // 10
    print(f"{' '.join(args)}: {(t1 - t0) / n:.0f} instructions, {(a1 - a0) / n:.2f} atomic operations per call")


if __name__ == "__main__":
    main()
