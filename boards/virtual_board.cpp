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
// The memory model is in-order (one ID), any number of outstanding bursts, a fixed first-beat
// latency, full bandwidth. Built by vta.boards.virtual; driven through the C ABI below.

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>

#include "verilated.h"
#include "Vvta_top.h"

#ifndef BUS_BYTES
#define BUS_BYTES 8
#endif
#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Burst {
  uint64_t addr;  // start byte address (master's view)
  uint32_t beats;
  uint32_t size;  // bytes per beat
  uint64_t ready;  // first cycle data may move
  uint32_t beat;
  uint32_t resp;  // 0 OKAY, 2 SLVERR, 3 DECERR
};

struct Board {
  std::unique_ptr<VerilatedContext> ctx;
  std::unique_ptr<Vvta_top> top;
  uint8_t* mem = nullptr;  // owned by the caller (a numpy array)
  uint64_t mem_size = 0;
  uint64_t base = 0;
  uint32_t latency = 8;
  uint32_t error_resp = 3;
  uint64_t cycle = 0;
  std::deque<Burst> reads, writes;
  std::deque<std::pair<uint64_t, uint32_t>> bresps;  // (ready cycle, response)
  // what the memory drives during the current cycle
  bool arready = true, awready = true, rvalid = false, rlast = false, wready = false,
       bvalid = false;
  uint32_t rresp = 0, bresp = 0;
  uint8_t rdata[BUS_BYTES] = {0};
  uint64_t errors = 0;  // bursts answered with an error response
  std::string error;

  Board() : ctx(new VerilatedContext), top(new Vvta_top(ctx.get(), "top")) {}

  uint32_t range_resp(uint64_t addr, uint64_t bytes) const {
    if (addr < base || addr + bytes > base + mem_size) return error_resp;
    return 0;
  }

  void get_wdata(uint8_t* dst) {
#if BUS_BYTES == 8
    uint64_t w = top->m_axi_gmem_wdata;
    memcpy(dst, &w, 8);
#else
    for (int i = 0; i < BUS_BYTES / 4; i++) {
      uint32_t w = top->m_axi_gmem_wdata[i];
      memcpy(dst + 4 * i, &w, 4);
    }
#endif
  }
  void put_rdata() {
#if BUS_BYTES == 8
    uint64_t w;
    memcpy(&w, rdata, 8);
    top->m_axi_gmem_rdata = w;
#else
    for (int i = 0; i < BUS_BYTES / 4; i++) {
      uint32_t w;
      memcpy(&w, rdata + 4 * i, 4);
      top->m_axi_gmem_rdata[i] = w;
    }
#endif
  }
  void drive() {
    top->m_axi_gmem_arready = arready;
    top->m_axi_gmem_awready = awready;
    top->m_axi_gmem_rvalid = rvalid;
    top->m_axi_gmem_rlast = rlast;
    top->m_axi_gmem_rresp = rresp;
    top->m_axi_gmem_rid = 0;
    put_rdata();
    top->m_axi_gmem_wready = wready;
    top->m_axi_gmem_bvalid = bvalid;
    top->m_axi_gmem_bresp = bresp;
    top->m_axi_gmem_bid = 0;
  }

  // One clock cycle: sample the master (settled, clock low), rising edge, memory handshakes of
  // the cycle that ended and what the memory drives next, falling edge.
  void tick() {
    top->eval();
    bool ar = arready && top->m_axi_gmem_arvalid;
    uint64_t araddr = top->m_axi_gmem_araddr;
    uint32_t arlen = top->m_axi_gmem_arlen, arsize = top->m_axi_gmem_arsize;
    bool r_done = rvalid && top->m_axi_gmem_rready;
    bool aw = awready && top->m_axi_gmem_awvalid;
    uint64_t awaddr = top->m_axi_gmem_awaddr;
    uint32_t awlen = top->m_axi_gmem_awlen, awsize = top->m_axi_gmem_awsize;
    bool w_done = wready && top->m_axi_gmem_wvalid;
    uint8_t wdata[BUS_BYTES];
    get_wdata(wdata);
    uint64_t wstrb = top->m_axi_gmem_wstrb;
    bool wlast = top->m_axi_gmem_wlast;
    bool b_done = bvalid && top->m_axi_gmem_bready;

    top->clk = 1;
    top->eval();
    cycle++;

    if (ar) {
      uint32_t size = 1u << arsize, beats = arlen + 1;
      uint64_t start = araddr & ~uint64_t(size - 1);
      uint32_t resp = range_resp(start, uint64_t(beats) * size);
      if (resp) errors++;
      reads.push_back(Burst{araddr, beats, size, cycle + latency, 0, resp});
    }
    if (r_done) {
      Burst& h = reads.front();
      if (++h.beat == h.beats) reads.pop_front();
    }
    if (aw) {
      uint32_t size = 1u << awsize, beats = awlen + 1;
      uint64_t start = awaddr & ~uint64_t(size - 1);
      uint32_t resp = range_resp(start, uint64_t(beats) * size);
      if (resp) errors++;
      writes.push_back(Burst{awaddr, beats, size, cycle, 0, resp});
    }
    if (w_done && !writes.empty()) {
      Burst& h = writes.front();
      uint64_t a = ((h.addr & ~uint64_t(h.size - 1)) + uint64_t(h.beat) * h.size) &
                   ~uint64_t(BUS_BYTES - 1);
      if (!h.resp) {
        for (int i = 0; i < BUS_BYTES; i++)
          if (wstrb >> i & 1) mem[a - base + i] = wdata[i];
      }
      if ((++h.beat == h.beats) != wlast && error.empty())
        error = "protocol: wlast does not match the burst length";
      if (h.beat == h.beats) {
        bresps.push_back({cycle + 1, h.resp});
        writes.pop_front();
      }
    }
    if (b_done) bresps.pop_front();

    // what the memory drives in the next cycle
    if (!rvalid || r_done) {
      rvalid = false;
      if (!reads.empty() && reads.front().ready <= cycle) {
        Burst& h = reads.front();
        uint64_t a = ((h.addr & ~uint64_t(h.size - 1)) + uint64_t(h.beat) * h.size) &
                     ~uint64_t(BUS_BYTES - 1);
        if (h.resp) memset(rdata, 0, BUS_BYTES);
        else memcpy(rdata, &mem[a - base], BUS_BYTES);
        rvalid = true;
        rlast = h.beat + 1 == h.beats;
        rresp = h.resp;
      }
    }
    wready = !writes.empty();
    if (!bvalid || b_done) {
      bvalid = !bresps.empty() && bresps.front().first <= cycle;
      bresp = bvalid ? bresps.front().second : 0;
    }
    drive();
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
  b->drive();
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
  b->base = base;
  b->mem = mem;
  b->mem_size = size;
}
EXPORT void vb_config(void* p, uint32_t latency, uint32_t error_resp) {
  Board* b = static_cast<Board*>(p);
  b->latency = latency < 1 ? 1 : latency;
  b->error_resp = error_resp;
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
EXPORT uint64_t vb_error_bursts(void* p) { return static_cast<Board*>(p)->errors; }
EXPORT const char* vb_error(void* p) { return static_cast<Board*>(p)->error.c_str(); }

// AXI4-Lite write; 0 on OKAY, the response code + 1 otherwise, -1 on a timeout.
EXPORT int vb_reg_write(void* p, uint32_t addr, uint32_t data) {
  Board* b = static_cast<Board*>(p);
  Vvta_top* t = b->top.get();
  t->s_axi_control_awaddr = addr;
  t->s_axi_control_awvalid = 1;
  t->s_axi_control_wdata = data;
  t->s_axi_control_wstrb = 0xF;
  t->s_axi_control_wvalid = 1;
  t->s_axi_control_bready = 1;
  for (int i = 0; i < 1000; i++) {
    t->eval();
    bool awr = t->s_axi_control_awready, wr = t->s_axi_control_wready;
    bool bv = t->s_axi_control_bvalid;
    uint32_t resp = t->s_axi_control_bresp;
    b->tick();
    if (awr) t->s_axi_control_awvalid = 0;
    if (wr) t->s_axi_control_wvalid = 0;
    if (bv) {
      t->s_axi_control_bready = 0;
      t->eval();
      return resp ? int(resp) + 1 : 0;
    }
  }
  return -1;
}
// AXI4-Lite read; the value, or -(response code + 1) / -100 on a timeout.
EXPORT int64_t vb_reg_read(void* p, uint32_t addr) {
  Board* b = static_cast<Board*>(p);
  Vvta_top* t = b->top.get();
  t->s_axi_control_araddr = addr;
  t->s_axi_control_arvalid = 1;
  t->s_axi_control_rready = 1;
  for (int i = 0; i < 1000; i++) {
    t->eval();
    bool arr = t->s_axi_control_arready, rv = t->s_axi_control_rvalid;
    uint32_t rd = t->s_axi_control_rdata, resp = t->s_axi_control_rresp;
    b->tick();
    if (arr) t->s_axi_control_arvalid = 0;
    if (rv) {
      t->s_axi_control_rready = 0;
      t->eval();
      return resp ? -int64_t(resp) - 1 : int64_t(rd);
    }
  }
  return -100;
}
