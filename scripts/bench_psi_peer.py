"""Times OpenMined PSI (`pip install openmined-psi`, P-256 ECDH-PSI with a
client/server split) on the same sets as `hush psi`, for docs/psi.md.

Both roles run in this one process, one after the other (the package has no
transport of its own): `wall_s` is the sum of both parties' compute, the
bytes are the serialized protobuf messages. Run it outside the repository's
venv, e.g. in ~/.cache/hush-peers/psi-venv:

    psi-venv/bin/python scripts/bench_psi_peer.py --n 1000000 --overlap 0.5

Prints one JSON line.
"""

import argparse
import json
import os
import time

import private_set_intersection.python as psi


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--overlap", type=float, default=0.5)
    ap.add_argument("--structure", default="raw", choices=["raw", "gcs", "bloom"])
    ap.add_argument("--fpr", type=float, default=1e-9)
    a = ap.parse_args()
    common = int(a.n * a.overlap)
    client_items = [f"id-{i}" for i in range(a.n)]
    server_items = [f"id-{i}" for i in range(a.n - common, 2 * a.n - common)]
    ds = {"raw": psi.DataStructure.RAW, "gcs": psi.DataStructure.GCS, "bloom": psi.DataStructure.BLOOM_FILTER}[a.structure]
    t0 = time.perf_counter()
    client = psi.client.CreateWithNewKey(True)
    server = psi.server.CreateWithNewKey(True)
    t_req = time.perf_counter()
    request = client.CreateRequest(client_items).SerializeToString()
    t_setup = time.perf_counter()
    setup = server.CreateSetupMessage(a.fpr, a.n, server_items, ds).SerializeToString()
    t_resp = time.perf_counter()
    response = server.ProcessRequest(psi.Request.FromString(request) if hasattr(psi.Request, "FromString") else request).SerializeToString()
    t_int = time.perf_counter()
    idx = client.GetIntersection(psi.ServerSetup.FromString(setup) if hasattr(psi.ServerSetup, "FromString") else setup,
                                 psi.Response.FromString(response) if hasattr(psi.Response, "FromString") else response)
    t1 = time.perf_counter()
    assert len(idx) == common, (len(idx), common)
    print(json.dumps({
        "bench": "psi_peer", "peer": "openmined-psi " + psi.__version__, "curve": "P-256", "structure": a.structure,
        "n_client": a.n, "n_server": a.n, "intersection": len(idx), "output": "client learns its indices",
        "wall_s": t1 - t0, "client_request_s": t_setup - t_req, "server_setup_s": t_resp - t_setup,
        "server_response_s": t_int - t_resp, "client_intersect_s": t1 - t_int,
        "bytes": len(request) + len(setup) + len(response), "threads": os.cpu_count(), "one_process": True,
    }))


if __name__ == "__main__":
    main()
