"""Times SecretFlow SPU's PSI (`pip install spu==0.9.5`, module spu.psi,
`psi_execute`) on the same sets as `hush psi`, for docs/psi.md: two OS
processes over brpc on loopback, CSV in, aligned CSV out.

    spu-venv/bin/python scripts/bench_psi_spu.py --n 1000000 --protocol ECDH
    spu-venv/bin/python scripts/bench_psi_spu.py --n 1000000 --protocol RR22

Prints one JSON line: wall_s (the slower rank's psi_execute), the
intersection, and `lo_bytes`: the loopback interface's byte counter over
the run (all loopback traffic on the machine, so an upper bound).
"""

import argparse
import json
import multiprocessing as mp
import os
import random
import socket
import tempfile
import time


def lo_bytes():
    with open("/proc/net/dev") as f:
        for line in f:
            if line.strip().startswith("lo:"):
                return int(line.split(":")[1].split()[0])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def party(rank, addrs, tmp, protocol, q):
    import spu.libspu as libspu
    import spu.psi as psi

    desc = libspu.link.Desc()
    desc.recv_timeout_ms = 3600 * 1000
    desc.http_max_payload_size = 32 * 1024 * 1024
    for r, a in enumerate(addrs):
        desc.add_party(f"P{r}", a)
    lctx = libspu.link.create_brpc(desc, rank)
    proto = {"ECDH": psi.PsiProtocol.PROTOCOL_ECDH, "RR22": psi.PsiProtocol.PROTOCOL_RR22,
             "KKRT": psi.PsiProtocol.PROTOCOL_KKRT}[protocol]
    cfg = psi.PsiExecuteConfig(
        protocol_conf=psi.PsiProtocolConfig(protocol=proto, receiver_rank=0, broadcast_result=True,
                                            ecdh_params=psi.EcdhParams(curve=psi.EllipticCurveType.CURVE_25519)),
        input_params=psi.InputParams(path=f"{tmp}/in{rank}.csv", selected_keys=["id"], keys_unique=True),
        output_params=psi.OutputParams(path=f"{tmp}/out{rank}.csv"),
        join_conf=psi.ResultJoinConfig(type=psi.ResultJoinType.JOIN_TYPE_INNER_JOIN),
    )
    lctx.barrier()
    t0 = time.perf_counter()
    rep = psi.psi_execute(cfg, lctx)
    t = time.perf_counter() - t0
    q.put((rank, t, rep.intersection_count, os.times()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--overlap", type=float, default=0.5)
    ap.add_argument("--protocol", default="ECDH", choices=["ECDH", "RR22", "KKRT"])
    a = ap.parse_args()
    c = int(a.n * a.overlap)
    rng = random.Random(1)
    ids = [f"{x:016x}" for x in rng.sample(range(1 << 60), 2 * a.n - c)]
    tmp = tempfile.mkdtemp()
    for rank, s in ((0, ids[:a.n]), (1, ids[a.n - c:])):
        rng.shuffle(s)
        with open(f"{tmp}/in{rank}.csv", "w") as f:
            f.write("id,v\n")
            f.writelines(f"{x},{i}\n" for i, x in enumerate(s))
    addrs = [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"]
    q = mp.Queue()
    b0 = lo_bytes()
    t0 = time.perf_counter()
    ps = [mp.Process(target=party, args=(r, addrs, tmp, a.protocol, q)) for r in (0, 1)]
    for p in ps:
        p.start()
    res = sorted(q.get() for _ in ps)
    for p in ps:
        p.join()
    total = time.perf_counter() - t0
    b1 = lo_bytes()
    print(json.dumps({
        "bench": "psi_peer", "peer": "spu 0.9.5 psi_execute", "protocol": a.protocol,
        "curve": "CURVE_25519" if a.protocol == "ECDH" else None, "n": a.n, "overlap": a.overlap,
        "intersection": [r[2] for r in res], "wall_s": max(r[1] for r in res), "process_wall_s": total,
        "cpu_s": [round(r[3].user + r[3].system, 2) for r in res], "lo_bytes": b1 - b0, "output": "aligned CSV at both (broadcast_result)",
    }))


if __name__ == "__main__":
    main()
