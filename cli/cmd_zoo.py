"""``vta zoo``: write a model of the zoo (seeded random weights) as an ONNX file."""

from __future__ import annotations

import argparse

from vta.isa.fileio import write_atomic

from .common import (
    ZOO_IMAGE_SIZE,
    ZOO_NUM_CLASSES,
    check_outputs,
    image_size_int,
    num_classes_int,
    seed_int,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("zoo", help="write a zoo network (ResNet-18, MobileNet-v1, DCGAN) as ONNX",
                       description="Build a well-known network with seeded random weights (He "
                                   "initialisation; nothing is downloaded) and write it as ONNX.")
    p.add_argument("name", nargs="?", metavar="NAME", help="the model (see --list)")
    p.add_argument("-o", "--output", metavar="MODEL.onnx", help="where to write the model")
    p.add_argument("--list", action="store_true", help="list the models and exit")
    p.add_argument("--image-size", type=image_size_int, metavar="N",
                   help="input height and width for the image classifiers, "
                        f"{ZOO_IMAGE_SIZE[0]}..{ZOO_IMAGE_SIZE[1]} (default 224)")
    p.add_argument("--num-classes", type=num_classes_int, metavar="K",
                   help=f"classifier outputs, {ZOO_NUM_CLASSES[0]}..{ZOO_NUM_CLASSES[1]} "
                        "(default 1000)")
    p.add_argument("--seed", type=seed_int, default=0,
                   help="weight seed, 0 .. 2**32-1 (default 0)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vta.compiler.graph import zoo  # deferred: off vta --help
    from vta.compiler.graph.errors import ModelError  # deferred: off vta --help

    if args.list:
        for e in zoo.ZOO.values():
            print(f"{e.name:<14} {e.description}")
        return 0
    if not args.name:
        raise ModelError(f"name a model ({', '.join(zoo.ZOO)}) or give --list")
    if not args.output:
        raise ModelError("give the output file with -o MODEL.onnx")
    if args.name not in zoo.ZOO:
        raise ModelError(f"unknown zoo model {args.name!r}; choose one of {', '.join(zoo.ZOO)}")
    check_outputs({"model file": args.output})
    kw = {"seed": args.seed}
    if args.name in ("resnet18", "mobilenet_v1"):
        if args.image_size is not None:
            kw["image_size"] = args.image_size
        if args.num_classes is not None:
            kw["num_classes"] = args.num_classes
    elif args.image_size is not None or args.num_classes is not None:
        raise ModelError(f"{args.name} takes no --image-size / --num-classes")
    model = zoo.build(args.name, **kw)
    write_atomic(args.output, model.SerializeToString(), "model file")
    print(f"wrote {args.output}: {args.name}, input {_shape(model.graph.input[0])} -> output "
          f"{_shape(model.graph.output[0])} (seed {args.seed})")
    return 0


def _shape(value_info) -> str:  # noqa: ANN001 - an onnx ValueInfoProto
    """The shape the written model declares (what the summary line reports)."""
    dims = value_info.type.tensor_type.shape.dim
    return "x".join(str(d.dim_value) if d.dim_value else (d.dim_param or "?") for d in dims)
