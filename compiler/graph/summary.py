"""What a compiled module runs where, and why; the VTA part's latency at a board's clock.

- :func:`cpu_reasons`: every layer that does not run on VTA, with the reason (used for the
  module's notes and ``vta compile``'s summary).
- :func:`compile_summary`: the summary ``vta compile`` ends with: layers on VTA, layers on the
  CPU grouped by reason, share of MACs on VTA.
- :func:`kernel_cycles` / :func:`latency`: cycles of the VTA layers (as the module records
  them, or a cycle-level target's own count) turned into ms and frames/s at a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import ops
from .ir import Graph
from .quant_info import QuantInfo

#: Prefix of the module notes that record a fallback (one per layer not on VTA).
FALLBACK = "fallback: "


def cpu_reasons(g: Graph, layers: Iterable[QuantInfo], partition: Mapping[str, str],
                lowering_errors: Mapping[str, str], cpu_layers: Iterable[str],
                vta_ops: Iterable[str]) -> dict[str, str]:
    """Layer -> why it runs on the CPU, for every layer of ``g`` not on VTA."""
    info = {i.node: i for i in layers}
    cpu_layers, vta_ops = set(cpu_layers), set(vta_ops)
    out: dict[str, str] = {}
    for n in g.nodes:
        # conversions between float and int8 are not layers of the model; nor are the nodes
        # the quantizer inserts with the attribute ``conversion`` (an offset tensor's QPad)
        if partition.get(n.name) == "vta" or ops.has(n.op, "conversion") \
                or n.attrs.get("conversion"):
            continue
        if n.name in lowering_errors:
            r = f"int8, does not fit VTA: {lowering_errors[n.name]}"
        elif n.name in cpu_layers:
            r = "int8, named by --cpu-layer"
        elif ops.has(n.op, "lowered") and n.op not in vta_ops:
            r = "int8, VTA disabled (--no-vta)" if not vta_ops or not ops.alu_kind(n.op) \
                else "int8, element-wise ops on the CPU (--elementwise cpu)"
        elif n.op.startswith("Q") or (n.name in info and info[n.name].out_scale is not None):
            r = "int8, no VTA kernel for this op"
        else:
            fr = info[n.name].float_reason if n.name in info else None
            r = f"float, {fr or 'no int8 kernel'}"
        out[n.name] = r
    return out


def fallback_notes(reasons: Mapping[str, str], g: Graph) -> list[str]:
    op_of = {n.name: n.op for n in g.nodes}
    return [f"{FALLBACK}{name} ({op_of[name]}) runs on the CPU ({r})"
            for name, r in reasons.items()]


def _reasons_from_notes(notes: Iterable[str]) -> dict[str, str]:
    out = {}
    for note in notes:
        if note.startswith(FALLBACK):
            head, _, r = note[len(FALLBACK):].partition(" runs on the CPU (")
            out[head.rsplit(" (", 1)[0]] = r[:-1]
    return out


def compile_summary(m: Any, out: str, *, names: int = 6) -> str:
    """``vta compile``'s closing summary of module ``m`` (written to ``out``)."""
    vta = [k for k, v in m.partition.items() if v == "vta"]
    macs = sum(m.macs.values())
    vmacs = sum(m.macs.get(k, 0) for k in vta)
    lines = [f"compiled {m.graph.name} -> {out} in {m.compile_seconds:.2f} s",
             f"  {len(vta)} layers on VTA: {vmacs / max(macs, 1) * 100:.1f}% of "
             f"{macs / 1e9:.3f} GMACs, {sum(k.insns for k in m.kernels.values())} "
             f"instructions",
             f"  DRAM arena {m.plan.size / 2**20:.2f} MiB (constants "
             f"{m.plan.const_size / 2**20:.2f} MiB; activations "
             f"{(m.plan.size - m.plan.const_size) / 2**20:.2f} MiB, "
             f"{(m.plan.naive_size - m.plan.const_size) / 2**20:.2f} MiB without reuse)"]
    alu: dict[str, int] = {}
    for n in m.graph.nodes:
        if m.partition.get(n.name) == "vta" and ops.alu_kind(n.op):
            alu[n.op] = alu.get(n.op, 0) + 1
    fused = [n.name for n in m.graph.nodes
             if m.partition.get(n.name) == "vta" and "residual" in n.attrs]
    if fused:
        lines.insert(2, f"    of which {len(fused)} with the residual add fused into the epilogue: "
                        + ", ".join(fused[:names])
                        + (f", ... ({len(fused) - names} more)" if len(fused) > names else ""))
    if alu:
        lines.insert(2, f"    of which {sum(alu.values())} element-wise on VTA's ALU (int8): "
                        + ", ".join(f"{op} {c}" for op, c in sorted(alu.items())))
    groups: dict[str, list[str]] = {}
    for name, r in _reasons_from_notes(m.notes).items():
        groups.setdefault(r, []).append(name)
    if groups:
        cpu = sum(len(v) for v in groups.values())
        lines.append(f"  {cpu} layers on the CPU, by reason:")
    for r, ns in sorted(groups.items(), key=lambda kv: -sum(m.macs.get(n, 0) for n in kv[1])):
        share = sum(m.macs.get(n, 0) for n in ns) / max(macs, 1) * 100
        shown = ", ".join(ns[:names]) + (f", ... ({len(ns) - names} more in the module's "
                                         f"notes)" if len(ns) > names else "")
        lines.append(f"    {r}: {len(ns)} ({share:.1f}% of MACs): {shown}")
    for o, a in m.agreement.items():
        lines.append(f"  int8 vs float on the first calibration input ({output_label(m.graph, o)}"
                     f"): cosine "
                     f"{a['cosine']:.4f}, top-1 {'match' if a['top1'] else 'differs'}")
    lines += [f"  note: {n}" for n in m.notes if not n.startswith(FALLBACK)]
    return "\n".join(lines)


def output_label(graph: Any, name: str) -> str:
    """A graph output's name for people: the name itself, unless the exporter numbered it
    (TorchScript's ``19``); then its index and the layer that makes it
    (``output 0 of /fc/Gemm (Gemm), tensor 19``)."""
    if not name.isdigit():
        return name
    made = {o: n for n in graph.nodes for o in n.outputs}
    node = made.get(name)
    while node is not None and node.op in {"Dequantize", "Quantize"} and node.inputs \
            and node.inputs[0] in made:  # the layer, not the int8 -> float conversion
        node = made[node.inputs[0]]
    index = graph.outputs.index(name) if name in graph.outputs else 0
    where = f" of {node.name} ({node.op})" if node is not None else ""
    return f"output {index}{where}, tensor {name}"


# ---------------------------------------------------------------------- latency
def kernel_cycles(m: Any) -> dict[str, int]:
    """Cycles of each VTA layer as the module records them (the performance model's estimate
    of its program; for a layer tuned with a tuning log, the cycles `vta tune` measured)."""
    return {name: int(round(k.cycles)) for name, k in m.kernels.items()}


@dataclass(frozen=True)
class Latency:
    cycles: int
    clock_mhz: float
    source: str  #: where the cycles come from (a target's count or the performance model)

    @property
    def ms(self) -> float:
        return self.cycles / (self.clock_mhz * 1e3)

    @property
    def fps(self) -> float:
        return 1e3 / self.ms if self.cycles else float("inf")

    def format(self, board: str) -> str:
        return (f"VTA part: {self.cycles} cycles = {self.ms:.3f} ms at {self.clock_mhz:g} MHz "
                f"({board}), {self.fps:.1f} frames/s ({self.source}; the CPU layers are not "
                f"included)")


def latency(cycles: Mapping[str, int], clock_mhz: float, source: str) -> Latency:
    return Latency(int(sum(cycles.values())), clock_mhz, source)


def host_part(seconds: Mapping[str, float], vta: Latency) -> str:
    """The CPU layers' time as measured on this machine (``seconds`` per CPU layer of a run),
    labelled so, and its sum with the VTA part at the board's clock."""
    ms = sum(seconds.values()) * 1e3
    return (f"host part: {ms:.3f} ms for {len(seconds)} CPU layers, measured on this "
            f"machine's CPU (not the board's ARM cores); VTA part + host part = "
            f"{vta.ms + ms:.3f} ms")
