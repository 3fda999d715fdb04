"""One party's driver for tests/python/test_lr_ray.py: starts this party's
own local two-node Ray cluster (ray.cluster_utils.Cluster on loopback),
runs hush.ray.train from a JSON spec (argv[1]) and prints the result as
JSON on the last line (exit 1 with {"error": ...} on failure)."""

import json
import sys

import numpy as np


def main() -> int:
    spec = json.loads(sys.argv[1])
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(spec.pop("extra_nodes", 1)):
        c.add_node(num_cpus=1)
    ray.init(address=c.address, logging_level="ERROR", log_to_driver=False)
    c.wait_for_nodes()
    import hush.ray as hr

    d = np.load(spec.pop("data"), allow_pickle=False)
    X = d["X"]
    y = d["y"] if "y" in d.files else None
    ids = [str(v) for v in d["ids"]] if "ids" in d.files else None
    try:
        r = hr.train(spec.pop("role"), X, y, ids=ids, **spec)
        r.pop("psi_rows", None)
        if "psi" in r:
            r["psi"].pop("rows", None)
        out = {"ok": True, **r}
        code = 0
    except Exception as e:  # noqa: BLE001
        out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        code = 1
    finally:
        ray.shutdown()
        c.shutdown()
    print(json.dumps(out))
    return code


if __name__ == "__main__":
    sys.exit(main())
