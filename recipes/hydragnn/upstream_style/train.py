"""An upstream-style HydraGNN 5.0 training script (written for MDLoader, in the shape of
HydraGNN's examples/*/train.py): a JSON config, flags, datasets, ``create_dataloaders``,
``update_config``, the model, ``train_validate_test`` with ``compute_grad_energy`` and
``precision``. The one MDLoader-specific line is the import chosen by ``--loader``:

    mpiexec -n 4 python recipes/hydragnn/upstream_style/train.py \\
        --inputfile recipes/hydragnn/upstream_style/gin.json --adios data/demo.bp --loader mdloader

``--loader hydragnn`` runs the same script on HydraGNN's own ``create_dataloaders`` (a PyG
DataLoader reading one graph a call from the file) for comparison. See docs/hydragnn-5.md.
"""

import argparse
import json

import torch
from mpi4py import MPI

import hydragnn
import hydragnn.utils.distributed  # noqa: F401 - hydragnn/utils has no __init__: HydraGNN main
import hydragnn.utils.model  # noqa: F401   loads these sub-packages only when asked
import hydragnn.utils.optimizer  # noqa: F401
import hydragnn.utils.print  # noqa: F401
import hydragnn.utils.profiling_and_tracing  # noqa: F401
from hydragnn.train.train_validate_test import resolve_precision
from hydragnn.utils.input_config_parsing import update_config, save_config
from hydragnn.utils.model import load_existing_model_config

from mdloader_plugin.integrations.hydragnn.dropin import AdiosDataset


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputfile", required=True, help="HydraGNN JSON config")
    ap.add_argument("--adios", required=True, help="HydraGNN-layout ADIOS2 file")
    ap.add_argument("--loader", choices=["mdloader", "hydragnn"], default="mdloader")
    ap.add_argument("--precision", default=None, help="fp32 | fp64 | bf16 (overrides config)")
    ap.add_argument("--log", default=None, help="run name under logs/")
    ap.add_argument("--num_epoch", type=int, default=None)
    args = ap.parse_args()

    if args.loader == "mdloader":
        from mdloader_plugin.integrations.hydragnn.dropin import create_dataloaders
    else:
        from hydragnn.preprocess.load_data import create_dataloaders

    with open(args.inputfile) as f:
        config = json.load(f)
    training = config["NeuralNetwork"]["Training"]
    if args.precision is not None:
        training["precision"] = args.precision
    if args.num_epoch is not None:
        training["num_epoch"] = args.num_epoch
    precision, param_dtype, _ = resolve_precision(training.get("precision", "fp32"))
    training["precision"] = precision
    torch.set_default_dtype(param_dtype)
    var_config = config["NeuralNetwork"]["Variables_of_interest"]
    var_config["graph_feature_dims"] = config["Dataset"]["graph_features"]["dim"]
    var_config["node_feature_dims"] = config["Dataset"]["node_features"]["dim"]
    verbosity = config["Verbosity"]["level"]

    hydragnn.utils.distributed.setup_ddp()
    comm = MPI.COMM_WORLD
    log_name = args.log or f"upstream-{args.loader}"
    hydragnn.utils.print.setup_log(log_name)
    writer = hydragnn.utils.model.get_summary_writer(log_name)

    sets = [AdiosDataset(args.adios, label, comm, var_config=var_config)
            for label in ("trainset", "valset", "testset")]
    train_loader, val_loader, test_loader = create_dataloaders(
        *sets, training["batch_size"])
    if args.loader == "hydragnn":  # upstream asks for pinned memory; on a CPU it only warns
        for loader in (train_loader, val_loader, test_loader):
            loader.pin_memory = torch.cuda.is_available()

    config = update_config(config, train_loader, val_loader, test_loader)
    save_config(config, log_name)
    torch.manual_seed(0)
    model = hydragnn.models.create_model_config(config=config["NeuralNetwork"],
                                                verbosity=verbosity)
    model = hydragnn.utils.distributed.get_distributed_model(model, verbosity)
    optimizer = hydragnn.utils.optimizer.select_optimizer(model, training["Optimizer"])
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=0.5, patience=5, min_lr=0.00001)
    load_existing_model_config(model, training, optimizer=optimizer)
    model = model.to(dtype=param_dtype)

    hydragnn.train.train_validate_test(
        model, optimizer, train_loader, val_loader, test_loader, writer, scheduler,
        config["NeuralNetwork"], log_name, verbosity,
        compute_grad_energy=config["NeuralNetwork"]["Architecture"].get(
            "enable_interatomic_potential", False),
        precision=precision)
    hydragnn.utils.model.save_model(model, optimizer, log_name)
    hydragnn.utils.profiling_and_tracing.print_timers(verbosity)
    if args.loader == "mdloader":
        from mdloader_plugin.integrations.hydragnn.dropin import close_dataloaders

        close_dataloaders()
    if writer is not None:
        writer.close()


if __name__ == "__main__":
    main()
