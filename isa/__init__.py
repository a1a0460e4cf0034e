"""vta.isa: the configuration, the 128-bit VTA instruction set, its encoding and text form.

This package imports nothing else of the kit; every other layer builds on it.
"""

from .config import DEFAULT, PARAMS, Config, preset_names
from .deps import (
    COMPUTE_MODULE,
    DEP_FLAGS,
    LOAD_MODULE,
    MODULE_FLAGS,
    MODULE_QUEUES,
    MODULES,
    NEXT,
    POP_FLAGS,
    PREV,
    PUSH_FLAGS,
    STORE_MODULE,
    TOKEN_QUEUE_NAMES,
    TOKEN_QUEUES,
    TokenQueue,
    queue_between,
    queue_of,
)
from .errors import (
    AsmError,
    ConfigError,
    DeadlockError,
    DecodeError,
    EncodeError,
    FileError,
    ProgramError,
    RaceError,
    VTAError,
)
from .insn import (
    AluInsn,
    FinishInsn,
    GemmInsn,
    Insn,
    MemInsn,
    Uop,
    decode,
    decode_program,
    decode_uop,
    decode_word,
    decode_words,
    encode,
    encode_program,
    encode_rows,
    encode_uop,
    encode_uops,
    encode_word,
    insn_class,
    nop_insn,
    program_words,
    uop_fields,
    words_to_bytes,
)
from .layout import (
    INSN_BITS,
    INSN_BYTES,
    INSN_QUEUE_DEPTH,
    TOKEN_QUEUE_DEPTH,
    UOP_BITS,
    UOP_BYTES,
    AluOp,
    Field,
    Layout,
    Layouts,
    MemType,
    Opcode,
    build_layouts,
)

__all__ = [
    "Config", "DEFAULT", "PARAMS", "preset_names",
    "VTAError", "ConfigError", "EncodeError", "DecodeError", "AsmError", "ProgramError",
    "DeadlockError", "RaceError", "FileError",
    "Insn", "MemInsn", "GemmInsn", "AluInsn", "FinishInsn", "Uop",
    "MODULES", "LOAD_MODULE", "COMPUTE_MODULE", "STORE_MODULE", "DEP_FLAGS", "POP_FLAGS",
    "PUSH_FLAGS", "PREV", "NEXT", "TokenQueue", "TOKEN_QUEUES", "TOKEN_QUEUE_NAMES",
    "MODULE_QUEUES", "MODULE_FLAGS", "queue_of", "queue_between",
    "encode", "decode", "encode_word", "decode_word", "encode_program", "decode_program",
    "encode_uop", "encode_uops", "decode_uop", "uop_fields", "insn_class", "nop_insn",
    "encode_rows", "decode_words", "program_words", "words_to_bytes",
    "Opcode", "MemType", "AluOp", "Field", "Layout", "Layouts", "build_layouts",
    "INSN_BITS", "INSN_BYTES", "UOP_BITS", "UOP_BYTES", "TOKEN_QUEUE_DEPTH", "INSN_QUEUE_DEPTH",
]
