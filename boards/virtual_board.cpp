// The virtual board: a board's generated top (vta_top, the module that goes into the bitstream)
// under Verilator, with the processor side modelled as the board's buses see it:
//
// - the host registers through the top's AXI4-Lite slave s_axi_control_* (vb_reg_read /
//   vb_reg_write run the clock while a transaction is in flight, like a CPU load or store);
// - DDR behind the top's AXI4 master m_axi_gmem_*: a byte array mapped at [base, base + size)
//   of the master's address space. A burst that touches an address outside that window is
//   answered like the board's interconnect does: DECERR (or SLVERR, vb_config) on every read
//   beat, zero data, and a DECERR write response with nothing written;
// - the processor's active-low reset rst_n, the clock, the interrupt line.
//
// The memory model is vta_axi::Memory (vta/hw/tsim/axi_bus.h, shared with tsim): in-order (one
// ID), any number of outstanding bursts, a fixed first-beat latency, full bandwidth; a protocol
// error stops it (vb_error says why). Built by vta.boards.virtual; driven through the C ABI
// below.

#include <cstdint>
#include <memory>
#include <string>

#include "verilated.h"
#include "Vvta_top.h"

#ifndef BUS_BYTES
#define BUS_BYTES 8
#endif

#include "axi_bus.h"  // (vta/hw/tsim/axi_bus.h)

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The top's AXI4 master (m_axi_gmem_*) and AXI4-Lite slave (s_axi_control_*), for axi_bus.h.
VTA_AXI_MASTER(Master, Vvta_top, m_axi_gmem_, BUS_BYTES);
VTA_AXI_LITE(Lite, Vvta_top, s_axi_control_);

struct Board {
  std::unique_ptr<VerilatedContext> ctx;
  std::unique_ptr<Vvta_top> top;
  vta_axi::Memory<Master> memory;
  uint64_t cycle = 0;
  bool stopped = false;  // the memory model saw a protocol error (memory.error): it stands still

  Board() : ctx(new VerilatedContext), top(new Vvta_top(ctx.get(), "top")) {
    memory.respond_errors = true;
    memory.max_outstanding = UINT32_MAX;
    memory.latency = 8;
  }

  // One clock cycle: sample the master (settled, clock low), rising edge, memory handshakes of
  // the cycle that ended and what the memory drives next, falling edge.
  void tick() {
    top->eval();
    auto s = memory.sample(*top);
    top->clk = 1;
    top->eval();
    cycle++;
    if (!stopped && memory.step(s)) memory.drive(*top);
    else stopped = true;
    top->eval();
    top->clk = 0;
    top->eval();
  }
};

}  // namespace

EXPORT void* vb_create() {
  Board* b = new Board;
  b->top->clk = 0;
  b->top->rst_n = 0;
  b->top->s_axi_control_awvalid = 0;
  b->top->s_axi_control_wvalid = 0;
  b->top->s_axi_control_bready = 0;
  b->top->s_axi_control_arvalid = 0;
  b->top->s_axi_control_rready = 0;
  b->top->s_axi_control_awprot = 0;
  b->top->s_axi_control_arprot = 0;
  b->top->m_axi_gmem_rid = 0;  // (one ID)
  b->top->m_axi_gmem_bid = 0;
  b->memory.drive(*b->top);
  b->top->eval();
  return b;
}
EXPORT void vb_free(void* p) {
  Board* b = static_cast<Board*>(p);
  b->top->final();
  delete b;
}
EXPORT int vb_bus_bytes() { return BUS_BYTES; }
// The DDR model: `size` bytes at `mem` (kept alive by the caller) mapped at `base`.
EXPORT void vb_mem(void* p, uint64_t base, uint8_t* mem, uint64_t size) {
  Board* b = static_cast<Board*>(p);
  b->memory.base = base;
  b->memory.data = mem;
  b->memory.size = size;
}
// The first-beat latency of reads, and the response to an access outside the DDR.
EXPORT void vb_config(void* p, uint32_t latency, uint32_t error_resp) {
  Board* b = static_cast<Board*>(p);
  b->memory.latency = latency < 1 ? 1 : latency;
  b->memory.error_resp = error_resp;
}
// Hold the processor's reset for `cycles` cycles, then release it.
EXPORT void vb_reset(void* p, int cycles) {
  Board* b = static_cast<Board*>(p);
  b->top->rst_n = 0;
  for (int i = 0; i < cycles; i++) b->tick();
  b->top->rst_n = 1;
  for (int i = 0; i < 4; i++) b->tick();  // the wrapper's reset synchroniser
}
EXPORT void vb_run(void* p, uint64_t cycles) {
  Board* b = static_cast<Board*>(p);
  for (uint64_t i = 0; i < cycles; i++) b->tick();
}
EXPORT uint64_t vb_cycle(void* p) { return static_cast<Board*>(p)->cycle; }
EXPORT int vb_interrupt(void* p) { return static_cast<Board*>(p)->top->__SYM__interrupt; }
EXPORT uint64_t vb_error_bursts(void* p) { return static_cast<Board*>(p)->memory.error_bursts; }
EXPORT const char* vb_error(void* p) { return static_cast<Board*>(p)->memory.error.c_str(); }

// AXI4-Lite write; 0 on OKAY, the response code + 1 otherwise, -1 on a timeout.
EXPORT int vb_reg_write(void* p, uint32_t addr, uint32_t data) {
  Board* b = static_cast<Board*>(p);
  uint32_t resp;
  auto status = vta_axi::lite_write<Lite>(*b->top, addr, data, [b] { b->tick(); return true; },
                                          &resp);
  if (status != vta_axi::LITE_OK) return -1;
  return resp ? int(resp) + 1 : 0;
}
// AXI4-Lite read; the value, or -(response code + 1) / -100 on a timeout.
EXPORT int64_t vb_reg_read(void* p, uint32_t addr) {
  Board* b = static_cast<Board*>(p);
  uint32_t value, resp;
  auto status = vta_axi::lite_read<Lite>(*b->top, addr, [b] { b->tick(); return true; }, &value,
                                         &resp);
  if (status != vta_axi::LITE_OK) return -100;
  return resp ? -int64_t(resp) - 1 : int64_t(value);
}
