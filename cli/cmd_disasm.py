"""``vta disasm``: print a binary instruction stream (or micro-op buffer) as assembler text."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from vta.isa.asm import (
    decode_uops,
    disassemble,
    disassemble_uops,
    reserved_bits,
    to_jsonl,
)
from vta.isa.errors import DecodeError, FileError
from vta.isa.fileio import read_bytes, write_atomic
from vta.isa.layout import INSN_BYTES, UOP_BYTES

from .common import add_config_args, check_outputs, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "disasm", help="disassemble an instruction stream",
        description="Print a binary instruction stream as assembler text (docs/asm.md), which "
                    "'vta asm' turns back into the same bytes. --json prints one JSON object "
                    "per instruction with TVM's field names; --uops reads a micro-op buffer "
                    "(4 bytes per micro-op) instead.")
    p.add_argument("input", metavar="IN.bin", help="instruction stream or micro-op buffer")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per line with TVM's field names")
    p.add_argument("--uops", action="store_true", help="the input is a micro-op buffer")
    p.add_argument("--index", action="store_true",
                   help="end each line with a '# N' comment giving its index")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the text here (atomically) instead of standard output")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    check_outputs({"text output": args.output}, inputs=(args.input, args.config))
    data = read_bytes(args.input, "binary input")
    unit, what = (UOP_BYTES, "a micro-op buffer") if args.uops else (
        INSN_BYTES, "an instruction stream")
    if not data:
        raise FileError(f"{args.input} is empty: not {what}")
    if len(data) % unit:
        raise FileError(f"{args.input} is {len(data)} bytes, not a multiple of {unit}: not "
                        f"{what}" + ("" if args.uops else " (use --uops for a micro-op buffer)"))
    try:
        if args.uops:
            if args.json:
                text = "".join(json.dumps(asdict(u)) + "\n" for u in decode_uops(data, cfg))
            else:
                text = disassemble_uops(data, cfg, index=args.index)
        else:
            text = to_jsonl(data, cfg) if args.json else disassemble(data, cfg, index=args.index)
            for n, mask in reserved_bits(data, cfg):
                print(f"vta disasm: warning: {args.input}: instruction {n} has bits set outside "
                      f"every field ({mask:#x}); they are not reproduced", file=sys.stderr)
    except DecodeError as e:
        raise DecodeError(f"{args.input}: {e}") from None
    if args.output:
        write_atomic(args.output, text, "text output")
    else:
        sys.stdout.write(text)
    return 0
