"""The instruction life cycle shared by load, compute and store.

Every module takes the next instruction from its queue, waits until each dependency token it
must pop is available and pops them together, runs the instruction, then waits until each queue
it must push to has room and pushes: pop-before-run, push-after-finish (ARCHITECTURE.md).
:func:`instruction_sequencer` builds that state machine inside a module's ``elaborate``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from .regs import MODULE_STATES

__all__ = ["ModuleStatusSignature", "instruction_sequencer"]


class ModuleStatusSignature(wiring.Signature):
    """Debug and event signals every execution module exports to the register block."""

    def __init__(self) -> None:
        super().__init__({
            "busy": Out(1),  # executing an instruction (popping, running, pushing)
            "token_wait": Out(1),  # waiting to pop or push a token
            "mem_wait": Out(1),  # waiting for memory
            "state": Out(4),  # MODULE_STATES code
            "done": Out(32),  # instructions completed since launch
        })


#: Cycles the sequencer spends per look at the queue's head while it gathers (``gather``): the
#: module registers the head, then whether it joins; then the head is taken or the gathering
#: instruction starts.
GATHER_CYCLES = 3


def instruction_sequencer(m: Module, *, insn_stream, insn: Value,
                          pops: Sequence[tuple[Value, object]],
                          pushes: Sequence[tuple[Value, object]],
                          exec_busy: Value, status, clear: Value,
                          gather: tuple[Value, Value, Signal] | None = None,
                          done_inc: Value | int = 1) -> Signal:
    """Build the pop/run/push state machine; return the one-cycle ``go`` pulse.

    ``insn`` is a register (of the queue's payload shape) that receives the instruction.
    ``pops``/``pushes`` are (flag bit of ``insn``, token interface) pairs. At ``go`` the module
    starts executing ``insn``; it reports completion by dropping ``exec_busy`` (sampled from the
    cycle after ``go`` on). ``clear`` (launch) resets the instruction counter.

    ``gather`` = (``head``, ``joins``, ``absorb``) lets one instruction take the ones after it
    along (the compute module's ALU chains, :mod:`vta.isa.fusion`): when ``head`` (of ``insn``)
    is high after the pops, the sequencer takes, one per :data:`GATHER_CYCLES` cycles, every
    next instruction of the queue for which ``joins`` is high, pulsing ``absorb`` for each (the
    module records it), and starts once the queue's head does not join (or the queue is
    empty). ``joins`` is sampled in the second cycle of each look: the module computes it from
    its own register of the queue's head (and its valid), loaded every cycle. ``done_inc`` is the
    number of instructions the one completing stands for.
    """
    go = Signal(name="go")
    done = Signal(32, name="done_count")
    m.d.comb += status.done.eq(done)
    with m.If(clear):
        m.d.sync += done.eq(0)
    with m.FSM(name="sequencer"):
        with m.State("IDLE"):
            m.d.comb += [insn_stream.ready.eq(1), status.state.eq(MODULE_STATES["idle"])]
            with m.If(insn_stream.valid):
                m.d.sync += insn.eq(insn_stream.payload)
                m.next = "POP"
        with m.State("POP"):
            ok = _move_tokens(m, status, "pop_tokens", pops, lambda q: q.avail,
                              lambda q: q.pop, "pop_ok")
            with m.If(ok):
                if gather is None:
                    m.d.comb += go.eq(1)
                    m.next = "RUN"
                else:
                    with m.If(gather[0]):
                        m.next = "GATHER"
                    with m.Else():
                        m.d.comb += go.eq(1)
                        m.next = "RUN"
        if gather is not None:
            # GATHER_CYCLES a look at the queue's head: the module registers the head (GATHER),
            # then whether it joins (LOOK), so no path runs from the queue's memory through the
            # comparison to its read enable
            joins_q = Signal(name="gather_joins")
            with m.State("GATHER"):
                m.d.comb += [status.busy.eq(1), status.state.eq(MODULE_STATES["run"])]
                m.next = "LOOK"
            with m.State("LOOK"):
                m.d.comb += [status.busy.eq(1), status.state.eq(MODULE_STATES["run"])]
                m.d.sync += joins_q.eq(gather[1])
                m.next = "TAKE"
            with m.State("TAKE"):
                m.d.comb += [status.busy.eq(1), status.state.eq(MODULE_STATES["run"])]
                with m.If(joins_q):
                    m.d.comb += [insn_stream.ready.eq(1), gather[2].eq(1)]
                    m.next = "GATHER"
                with m.Else():
                    m.d.comb += go.eq(1)
                    m.next = "RUN"
        with m.State("RUN"):
            m.d.comb += [status.busy.eq(1), status.state.eq(MODULE_STATES["run"])]
            with m.If(~exec_busy):
                m.next = "PUSH"
        with m.State("PUSH"):
            ok = _move_tokens(m, status, "push_tokens", pushes, lambda q: q.ready,
                              lambda q: q.push, "push_ok")
            with m.If(ok):
                m.d.sync += done.eq(done + done_inc)
                m.next = "IDLE"
    return go


def _move_tokens(m: Module, status, state: str, pairs: Sequence[tuple[Value, object]],
                 can: Callable[[object], Value], move: Callable[[object], Value],
                 name: str) -> Signal:
    """The POP or PUSH state's logic: ``ok`` when every queue whose flag is set can move its
    token (``can(q)``: a token to pop, room to push), and then all of them move it at once
    (``move(q)``); otherwise the module waits for tokens."""
    ok = Signal(name=name)
    m.d.comb += [ok.eq(1), status.busy.eq(1), status.state.eq(MODULE_STATES[state])]
    for flag, q in pairs:
        with m.If(flag & ~can(q)):
            m.d.comb += ok.eq(0)
    with m.If(ok):
        for flag, q in pairs:
            m.d.comb += move(q).eq(flag)
    with m.Else():
        m.d.comb += status.token_wait.eq(1)
    return ok
