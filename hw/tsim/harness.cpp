// Verilator harness of the VTA core: a DRAM model behind the AXI4 master port, a host driver on
// the AXI4-Lite port, a watchdog, and a small C ABI driven from Python through ctypes
// (vta/hw/tsim/__init__.py). Compiled together with the core's Verilog by `verilator --cc --build`.
//
// Per clock cycle: the master's outputs are sampled with clk low (settled), the rising edge is
// evaluated, the models advance (handshakes of the cycle just ended, then what they drive in the
// next cycle) and the falling edge settles the new inputs. This matches vta.hw.axi_model.
//
// The memory model and the AXI4-Lite driver are vta_axi's (axi_bus.h, shared with the virtual
// boards). Compile-time parameters: BUS_BYTES (8 or 16) and VM_TRACE (from --trace) for VCD
// dumps.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "verilated.h"
#include "Vvta_core.h"
#if VM_TRACE
#include "verilated_vcd_c.h"
#endif

#ifndef BUS_BYTES
#define BUS_BYTES 8
#endif

#include "axi_bus.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The core's AXI4 master (m_axi_*) and AXI4-Lite slave (s_axil_*), for axi_bus.h.
VTA_AXI_MASTER(Master, Vvta_core, m_axi_, BUS_BYTES);
VTA_AXI_LITE(Lite, Vvta_core, s_axil_);

struct Sample {  // the debug ports at a cycle where one of them changed
  uint64_t cycle;
  uint32_t states, load_done, compute_done, store_done;
};

enum Status { OK = 0, FINISHED = 1, DEADLOCK = 2, CYCLE_LIMIT = 3, ERROR = 4 };

struct Sim {
  std::unique_ptr<VerilatedContext> ctx;
  std::unique_ptr<Vvta_core> top;
#if VM_TRACE
  std::unique_ptr<VerilatedVcdC> vcd;
#endif
  std::vector<uint8_t> mem;
  vta_axi::Memory<Master> memory;  // (its `error` is the harness's)
  // trace sampling (per-module instruction spans from the core's debug outputs)
  bool tracing = false;
  std::vector<Sample> samples;
  Sample last_sample = {0, 0xFFFFFFFFu, 0, 0, 0};

  void dump() {
#if VM_TRACE
    if (vcd) vcd->dump(ctx->time());
#endif
  }

  // One clock cycle of the core and the memory model. Returns false on a model error.
  bool tick() {
    auto s = memory.sample(*top);  // the master, settled with clk low
    ctx->timeInc(5);
    top->clk = 1;
    top->eval();
    dump();
    if (!memory.step(s)) return false;
    memory.drive(*top);
    ctx->timeInc(5);
    top->clk = 0;
    top->eval();
    dump();
    if (tracing) sample_trace();
    return true;
  }

  void sample_trace() {
#ifdef HAVE_DEBUG_PORTS
    Sample x{memory.cycle, top->debug_states, top->debug_load_done, top->debug_compute_done,
             top->debug_store_done};
    Sample& l = last_sample;
    if (x.states != l.states || x.load_done != l.load_done || x.compute_done != l.compute_done ||
        x.store_done != l.store_done) {
      samples.push_back(x);
      l = x;
    }
#endif
  }

  // ---------------------------------------------------------------- host register access
  // The AXI4-Lite driver: same protocol as vta.hw.axi_sim.AxiLiteHost.
  bool lite_done(vta_axi::LiteStatus status, const char* kind) {
    if (status == vta_axi::LITE_TIMEOUT)
      memory.error = std::string("protocol: AXI-Lite ") + kind + " got no response in " +
                     std::to_string(vta_axi::LITE_CYCLES) + " cycles";
    return status == vta_axi::LITE_OK;
  }

  int reg_write(uint32_t addr, uint32_t data) {
    uint32_t resp;
    auto status = vta_axi::lite_write<Lite>(*top, addr, data, [this] { return tick(); }, &resp);
    return lite_done(status, "write") ? 0 : -1;
  }

  int64_t reg_read(uint32_t addr) {
    uint32_t value, resp;
    auto status = vta_axi::lite_read<Lite>(*top, addr, [this] { return tick(); }, &value, &resp);
    return lite_done(status, "read") ? int64_t(value) : -1;
  }
};

}  // namespace

EXPORT void* tsim_create(const char* vcd_path) {
  Sim* s = new Sim;
  s->ctx.reset(new VerilatedContext);
  s->ctx->commandArgs(0, (const char**)nullptr);
  s->top.reset(new Vvta_core{s->ctx.get(), "top"});
#if VM_TRACE
  if (vcd_path && vcd_path[0]) {
    s->ctx->traceEverOn(true);
    s->vcd.reset(new VerilatedVcdC);
    s->top->trace(s->vcd.get(), 99);
    s->vcd->open(vcd_path);
  }
#else
  (void)vcd_path;
#endif
  s->top->clk = 0;
  s->top->rst = 0;
  s->memory.drive(*s->top);
  s->top->eval();
  return s;
}

EXPORT void tsim_free(void* p) {
  Sim* s = static_cast<Sim*>(p);
#if VM_TRACE
  if (s->vcd) s->vcd->close();
#endif
  s->top->final();
  delete s;
}

EXPORT int tsim_bus_bytes() { return BUS_BYTES; }

EXPORT int tsim_has_trace_ports() {
#ifdef HAVE_DEBUG_PORTS
  return 1;
#else
  return 0;
#endif
}

EXPORT uint8_t* tsim_mem_alloc(void* p, uint64_t size, uint64_t write_limit) {
  Sim* s = static_cast<Sim*>(p);
  s->mem.assign(size, 0);
  s->memory.data = s->mem.data();
  s->memory.size = size;
  s->memory.write_limit = write_limit;
  return s->mem.data();
}

EXPORT void tsim_config(void* p, uint32_t latency, uint32_t write_latency, double bandwidth,
                        double stall, uint64_t seed, uint32_t max_outstanding, int tracing) {
  Sim* s = static_cast<Sim*>(p);
  vta_axi::Memory<Master>& m = s->memory;
  m.latency = latency < 1 ? 1 : latency;
  m.write_latency = write_latency < 1 ? 1 : write_latency;
  m.bandwidth = bandwidth;
  m.stall_threshold = uint32_t(stall * 4294967296.0);
  m.rng = seed * 0x9E3779B97F4A7C15ull + 1;
  m.max_outstanding = max_outstanding;
  s->tracing = tracing != 0;
}

EXPORT int tsim_reset(void* p, int cycles) {
  Sim* s = static_cast<Sim*>(p);
  s->top->rst = 1;
  for (int i = 0; i < cycles; i++)
    if (!s->tick()) return -1;
  s->top->rst = 0;
  // The core's reset comes through a register (vta.hw.probe's reset stage): one more cycle for
  // it to see rst low, so that it is out of reset when this returns, as without the stage (a
  // core built without it idles for that cycle).
  if (!s->tick()) return -1;
  s->memory.reset();
  s->memory.drive(*s->top);
  s->top->eval();
  return 0;
}

EXPORT int tsim_reg_write(void* p, uint32_t addr, uint32_t data) {
  return static_cast<Sim*>(p)->reg_write(addr, data);
}

EXPORT int64_t tsim_reg_read(void* p, uint32_t addr) {
  return static_cast<Sim*>(p)->reg_read(addr);
}

EXPORT uint64_t tsim_cycle(void* p) { return static_cast<Sim*>(p)->memory.cycle; }

EXPORT const char* tsim_error(void* p) { return static_cast<Sim*>(p)->memory.error.c_str(); }

// Run until the core raises `interrupt` (finished), at most max_cycles cycles. The watchdog:
// after idle_limit / 2 cycles without memory traffic, the progress registers are read through
// AXI-Lite (as a host would); unchanged for idle_limit cycles means deadlock. `progress` lists
// `n_progress` register addresses.
EXPORT int tsim_run(void* p, uint64_t max_cycles, uint64_t idle_limit, const uint32_t* progress,
                    int n_progress) {
  Sim* s = static_cast<Sim*>(p);
  const vta_axi::Memory<Master>& m = s->memory;
  uint64_t start = m.cycle;
  uint64_t last_progress = m.cycle;
  std::vector<int64_t> snap(n_progress, -1), cur(n_progress);
  bool have_snap = false;
  uint64_t next_check = 0;
  for (;;) {
    if (s->top->__SYM__interrupt) return FINISHED;  // Verilator renames `interrupt`
    if (max_cycles && m.cycle - start >= max_cycles) return CYCLE_LIMIT;
    if (!s->tick()) return ERROR;
    if (m.last_activity > last_progress) last_progress = m.last_activity;
    if (idle_limit && m.cycle - last_progress >= idle_limit / 2 && m.cycle >= next_check) {
      next_check = m.cycle + idle_limit / 8 + 1;
      for (int i = 0; i < n_progress; i++) {
        cur[i] = s->reg_read(progress[i]);
        if (cur[i] < 0) return ERROR;
      }
      if (!have_snap || cur != snap) {
        snap = cur;
        have_snap = true;
        last_progress = m.cycle;
      } else if (m.cycle - last_progress >= idle_limit) {
        return DEADLOCK;
      }
    }
  }
}

EXPORT uint64_t tsim_sample_count(void* p) { return static_cast<Sim*>(p)->samples.size(); }

// Copies the trace samples as 5 x uint64 each: cycle, states, load/compute/store done.
EXPORT void tsim_samples(void* p, uint64_t* out) {
  Sim* s = static_cast<Sim*>(p);
  for (size_t i = 0; i < s->samples.size(); i++) {
    const Sample& x = s->samples[i];
    out[5 * i] = x.cycle;
    out[5 * i + 1] = x.states;
    out[5 * i + 2] = x.load_done;
    out[5 * i + 3] = x.compute_done;
    out[5 * i + 4] = x.store_done;
  }
}

EXPORT void tsim_axi_stats(void* p, uint64_t* out) {
  Sim* s = static_cast<Sim*>(p);
  out[0] = s->memory.read_bursts;
  out[1] = s->memory.write_bursts;
  out[2] = s->memory.read_beats;
  out[3] = s->memory.write_beats;
}
