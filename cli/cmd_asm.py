"""``vta asm``: assemble VTA assembler text (or its JSON-lines form) into a binary stream."""

from __future__ import annotations

import argparse
import sys

from vta.isa.asm import assemble_bytes, assemble_uops_bytes, encode_program, from_jsonl
from vta.isa.fileio import read_stream, read_text, write_atomic

from .common import add_config_args, check_outputs, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "asm", help="assemble text into an instruction stream",
        description="Assemble VTA assembler text (docs/asm.md) into the binary instruction "
                    "stream (16 little-endian bytes per instruction). A file whose first "
                    "instruction line starts with '{' is read as the JSON-lines form that "
                    "'vta disasm --json' prints. With --uops, assemble a micro-op buffer "
                    "('uop dst_idx=.. src_idx=.. wgt_idx=..' lines, 4 bytes each).")
    p.add_argument("input", metavar="IN.s", help="assembler text ('-' for standard input)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.bin",
                   help="binary output (written atomically; not the input itself)")
    p.add_argument("--uops", action="store_true", help="assemble a micro-op buffer")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="do not print warnings (missing finish, unused flags, ...)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    check_outputs({"binary output": args.output}, inputs=(args.input, args.config))
    if args.input == "-":
        text, name = read_stream(sys.stdin, "assembler input"), "<stdin>"
    else:
        text, name = read_text(args.input, "assembler file"), args.input

    def warn(message: str) -> None:
        if not args.quiet:
            print(f"vta asm: warning: {message}", file=sys.stderr)

    if args.uops:
        data = assemble_uops_bytes(text, cfg, filename=name)
    elif _is_jsonl(text):
        data = encode_program(from_jsonl(text, cfg, filename=name), cfg)
    else:
        data = assemble_bytes(text, cfg, filename=name, warn=warn)
    write_atomic(args.output, data, "binary output")
    return 0


def _is_jsonl(text: str) -> bool:
    for line in text.splitlines():
        s = line.strip()
        if s:
            return s.startswith("{")
    return False
