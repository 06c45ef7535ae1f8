"""The launcher (``python -m mdloader_plugin.hydragnn SCRIPT ARGS``) with a routing probe: for
every forward of HydraGNN's ``Base``, the graphs each output branch received and each graph's data
set told from its atoms alone (Z <= 8: molecules, file 0; metals: file 1), written per rank to
``$PROBE_OUT/rank<r>.json`` at exit. The training script itself runs unmodified.

Usage: mpiexec -n N python launch_with_probe.py SCRIPT [ARGS]"""

import atexit
import json
import os
import sys


def install_probe(out_dir: str) -> None:
    import torch
    from hydragnn.models.Base import Base

    forward, batches, seen = Base.forward, [], {}

    def count(name):
        return lambda module, inputs, output: seen.__setitem__(
            name, seen.get(name, 0) + inputs[0].shape[0])

    def probed(self, data):
        if not getattr(self, "_probe_hooked", False):
            for name, module in self.graph_shared.items():
                module.register_forward_hook(count(name))
            self._probe_hooked = True
        seen.clear()
        out = forward(self, data)
        z = data.x[:, 0].to(torch.float64)
        zmax = torch.zeros(int(data.num_graphs), dtype=torch.float64).scatter_reduce(
            0, data.batch, z, reduce="amax", include_self=False)
        ids = data.dataset_name.view(-1).tolist() if hasattr(data, "dataset_name") else None
        batches.append({"rows": dict(seen), "kinds": (zmax > 10).long().tolist(), "ids": ids})
        return out

    Base.forward = probed
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()

    def dump():
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(batches, f)

    atexit.register(dump)


if __name__ == "__main__":
    from mdloader_plugin.integrations.hydragnn.upstream import launcher

    orig = launcher.run_script

    def run_script(script, args):
        install_probe(os.environ["PROBE_OUT"])
        orig(script, args)

    launcher.run_script = run_script
    sys.exit(launcher.main(sys.argv[1:]))
