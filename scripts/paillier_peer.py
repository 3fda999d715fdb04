#!/usr/bin/env python
"""pypaillier's batch API timed on one core (the peer of `hush bench
paillier`): run with a Python that has `pip install pypaillier` (import
name `paillier`) and RAYON_NUM_THREADS=1 (scripts/record_paillier_peers.py
does both). Prints one JSON line:

  {"peer":"pypaillier","bits":2048,"enc_batch_us":…,"dec_batch_us":…,
   "ct_pt_batch_us":…,"ct_pt_batch_bits":64,"batch":…,"reps":…}

Each figure is µs per element of one batch call (encrypt_integers on
random 64-bit values, decrypt_many on their ciphertexts,
multiply_integers_public by random 64-bit scalars with the top bit set,
the scalars `hush bench paillier` draws), the minimum over `--reps` calls
after one warm-up call. Key generation (safe primes) is not timed.

Usage: paillier_peer.py [--bits 2048] [--batch 64] [--reps 3] [--seed 1]
"""
import argparse
import json
import os
import random
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bits", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    import paillier

    if os.environ.get("RAYON_NUM_THREADS") != "1":
        sys.exit("paillier_peer.py: set RAYON_NUM_THREADS=1 (one core, as hush's bench)")
    rnd = random.Random(a.seed)
    t0 = time.perf_counter()
    pk, sk = paillier.generate_keypair(a.bits)
    keygen = time.perf_counter() - t0
    ms = [rnd.getrandbits(64) for _ in range(a.batch)]
    ks = [rnd.getrandbits(64) | 1 << 63 for _ in range(a.batch)]

    def best(f):
        f()
        times = []
        for _ in range(a.reps):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return min(times) * 1e6 / a.batch

    cts = paillier.encrypt_integers(pk, ms)
    prods = paillier.multiply_integers_public(pk, cts, ks)
    # sanity (untimed): the batch API decrypts to the plaintexts and products
    assert [int(x) for x in paillier.decrypt_many(sk, cts)] == ms
    assert [int(x) for x in paillier.decrypt_many(sk, prods)] == [m * k for m, k in zip(ms, ks)]
    enc = best(lambda: paillier.encrypt_integers(pk, ms))
    dec = best(lambda: paillier.decrypt_many(sk, cts))
    ctpt = best(lambda: paillier.multiply_integers_public(pk, cts, ks))
    ver = "?"
    try:
        from importlib.metadata import version
        ver = version("pypaillier")
    except Exception:
        pass
    print(json.dumps({"bench": "paillier", "peer": "pypaillier", "peer_version": ver, "bits": a.bits,
                      "enc_batch_us": enc, "dec_batch_us": dec, "ct_pt_batch_us": ctpt, "ct_pt_batch_bits": 64,
                      "batch": a.batch, "reps": a.reps, "threads": 1, "keygen_s": keygen}))


if __name__ == "__main__":
    main()
