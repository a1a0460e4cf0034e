// Verilator harness of the VTA core: a DRAM model behind the AXI4 master port, a host driver on
// the AXI4-Lite port, a watchdog, and a small C ABI driven from Python through ctypes
// (vta/hw/tsim/__init__.py). Compiled together with the core's Verilog by `verilator --cc --build`.
//
// Per clock cycle: the master's outputs are sampled with clk low (settled), the rising edge is
// evaluated, the models advance (handshakes of the cycle just ended, then what they drive in the
// next cycle) and the falling edge settles the new inputs. This matches vta.hw.axi_model.
//
// Compile-time parameters: BUS_BYTES (8 or 16), TOP (the Verilated class, Vvta_core), and
// VM_TRACE (from --trace) for VCD dumps.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
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

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Burst {
  uint64_t addr;
  uint32_t beats;
  uint32_t size;
  uint64_t ready;
  uint32_t beat;
  uint64_t beat_addr() const {
    return beat == 0 ? addr : ((addr & ~uint64_t(size - 1)) + uint64_t(beat) * size);
  }
};

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
  uint64_t write_limit = 0;
  // memory model parameters
  uint32_t latency = 32, write_latency = 8, max_outstanding = 8;
  double bandwidth = 0.0;  // bytes per cycle; 0 = one bus word per cycle
  double credit = BUS_BYTES;
  uint32_t stall_threshold = 0;  // random backpressure: stall when rng < threshold (of 2^32)
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  // model state
  std::deque<Burst> reads, writes;
  std::deque<uint64_t> bresp;
  bool arready = false, rvalid = false, rlast = false, awready = false, wready = false,
       bvalid = false;
  uint8_t rdata[BUS_BYTES] = {0};
  uint64_t cycle = 0, last_activity = 0;
  uint64_t read_bursts = 0, write_bursts = 0, read_beats = 0, write_beats = 0;
  std::string error;
  // trace sampling (per-module instruction spans from the core's debug outputs)
  bool tracing = false;
  std::vector<Sample> samples;
  Sample last_sample = {0, 0xFFFFFFFFu, 0, 0, 0};

  bool go() {
    if (!stall_threshold) return true;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return uint32_t(rng >> 16) >= stall_threshold;
  }

  bool check_burst(const char* kind, uint64_t addr, uint32_t len, uint32_t size_log,
                   uint32_t burst, Burst* out) {
    uint32_t size = 1u << size_log;
    char buf[256];
    if (burst != 1) {
      snprintf(buf, sizeof buf, "protocol: %s burst at 0x%llx has burst type %u (only INCR=1)",
               kind, (unsigned long long)addr, burst);
      error = buf;
      return false;
    }
    if (size > BUS_BYTES) {
      snprintf(buf, sizeof buf, "protocol: %s burst at 0x%llx of size %u exceeds the bus", kind,
               (unsigned long long)addr, size);
      error = buf;
      return false;
    }
    uint64_t start = addr & ~uint64_t(size - 1);
    uint64_t end = start + uint64_t(len + 1) * size;
    if (start / 4096 != (end - 1) / 4096) {
      snprintf(buf, sizeof buf, "protocol: %s burst at 0x%llx of %u beats crosses 4 KiB", kind,
               (unsigned long long)addr, len + 1);
      error = buf;
      return false;
    }
    if (end > mem.size()) {
      snprintf(buf, sizeof buf,
               "access: the core %s bytes 0x%llx..0x%llx, beyond the %llu-byte memory (is a "
               "dram_base or size out of range?)",
               kind[0] == 'r' ? "read" : "wrote", (unsigned long long)addr,
               (unsigned long long)(end - 1), (unsigned long long)mem.size());
      error = buf;
      return false;
    }
    *out = Burst{addr, len + 1, size, cycle + (kind[0] == 'r' ? latency : 0), 0};
    return true;
  }

  // ---------------------------------------------------------------- signal access
  void get_wdata(uint8_t* dst) {
#if BUS_BYTES == 8
    uint64_t w = top->m_axi_wdata;
    memcpy(dst, &w, 8);
#else
    for (int i = 0; i < BUS_BYTES / 4; i++) {
      uint32_t w = top->m_axi_wdata[i];
      memcpy(dst + 4 * i, &w, 4);
    }
#endif
  }
  void put_rdata() {
#if BUS_BYTES == 8
    uint64_t w;
    memcpy(&w, rdata, 8);
    top->m_axi_rdata = w;
#else
    for (int i = 0; i < BUS_BYTES / 4; i++) {
      uint32_t w;
      memcpy(&w, rdata + 4 * i, 4);
      top->m_axi_rdata[i] = w;
    }
#endif
  }
  void drive() {
    top->m_axi_arready = arready;
    top->m_axi_rvalid = rvalid;
    top->m_axi_rlast = rlast;
    top->m_axi_rresp = 0;
    put_rdata();
    top->m_axi_awready = awready;
    top->m_axi_wready = wready;
    top->m_axi_bvalid = bvalid;
    top->m_axi_bresp = 0;
  }

  void dump() {
#if VM_TRACE
    if (vcd) vcd->dump(ctx->time());
#endif
  }

  // One clock cycle of the core and the memory model. Returns false on a model error.
  bool tick() {
    // sample the master (settled with clk low)
    bool s_arvalid = top->m_axi_arvalid, s_rready = top->m_axi_rready;
    bool s_awvalid = top->m_axi_awvalid, s_wvalid = top->m_axi_wvalid;
    bool s_bready = top->m_axi_bready;
    bool ar_hs = arready && s_arvalid, r_hs = rvalid && s_rready;
    bool aw_hs = awready && s_awvalid, w_hs = wready && s_wvalid, b_hs = bvalid && s_bready;
    uint64_t araddr = 0, awaddr = 0;
    uint32_t arlen = 0, arsize = 0, arburst = 0, awlen = 0, awsize = 0, awburst = 0;
    uint32_t wstrb = 0;
    bool wlast = false;
    uint8_t wdata[BUS_BYTES];
    if (ar_hs) {
      araddr = top->m_axi_araddr;
      arlen = top->m_axi_arlen;
      arsize = top->m_axi_arsize;
      arburst = top->m_axi_arburst;
    }
    if (aw_hs) {
      awaddr = top->m_axi_awaddr;
      awlen = top->m_axi_awlen;
      awsize = top->m_axi_awsize;
      awburst = top->m_axi_awburst;
    }
    if (w_hs) {
      get_wdata(wdata);
      wstrb = top->m_axi_wstrb;
      wlast = top->m_axi_wlast;
    }
    // rising edge
    ctx->timeInc(5);
    top->clk = 1;
    top->eval();
    dump();
    // the model: handshakes of the cycle that ended
    if (ar_hs) {
      Burst b;
      if (!check_burst("read", araddr, arlen, arsize, arburst, &b)) return false;
      reads.push_back(b);
      read_bursts++;
      last_activity = cycle;
    }
    if (r_hs) {
      Burst& h = reads.front();
      h.beat++;
      read_beats++;
      if (h.beat == h.beats) reads.pop_front();
      last_activity = cycle;
    }
    if (aw_hs) {
      Burst b;
      if (!check_burst("write", awaddr, awlen, awsize, awburst, &b)) return false;
      writes.push_back(b);
      write_bursts++;
      last_activity = cycle;
    }
    if (w_hs) {
      Burst& h = writes.front();
      bool last = h.beat == h.beats - 1;
      if (wlast != last) {
        char buf[160];
        snprintf(buf, sizeof buf, "protocol: write burst at 0x%llx: wlast=%d on beat %u of %u",
                 (unsigned long long)h.addr, int(wlast), h.beat + 1, h.beats);
        error = buf;
        return false;
      }
      uint64_t a = h.beat_addr() & ~uint64_t(BUS_BYTES - 1);
      for (int i = 0; i < BUS_BYTES; i++) {
        if (wstrb >> i & 1) {
          if (a + i >= write_limit) {
            char buf[200];
            snprintf(buf, sizeof buf,
                     "access: the core wrote byte 0x%llx, beyond the %llu-byte DRAM image (is a "
                     "STORE's dram_base or size out of range?)",
                     (unsigned long long)(a + i), (unsigned long long)write_limit);
            error = buf;
            return false;
          }
          mem[a + i] = wdata[i];
        }
      }
      if (bandwidth > 0) credit -= BUS_BYTES;
      h.beat++;
      write_beats++;
      if (last) {
        writes.pop_front();
        bresp.push_back(cycle + write_latency);
      }
      last_activity = cycle;
    }
    if (b_hs) {
      bresp.pop_front();
      last_activity = cycle;
    }
    cycle++;
    bool limited = bandwidth > 0;
    if (limited) {
      credit += bandwidth;
      if (credit > BUS_BYTES) credit = BUS_BYTES;
    }
    arready = reads.size() < max_outstanding && go();
    awready = writes.size() < max_outstanding && go();
    if (!rvalid || r_hs) {
      rvalid = false;
      if (!reads.empty()) {
        Burst& h = reads.front();
        if (h.ready <= cycle && (!limited || credit >= BUS_BYTES) && go()) {
          if (limited) credit -= BUS_BYTES;
          rvalid = true;
          rlast = h.beat == h.beats - 1;
          memcpy(rdata, &mem[h.beat_addr() & ~uint64_t(BUS_BYTES - 1)], BUS_BYTES);
        }
      }
    }
    wready = !writes.empty() && (!limited || credit >= BUS_BYTES) && go();
    if (!bvalid || b_hs) bvalid = !bresp.empty() && bresp.front() <= cycle && go();
    drive();
    // falling edge
    ctx->timeInc(5);
    top->clk = 0;
    top->eval();
    dump();
    if (tracing) sample_trace();
    return true;
  }

  void sample_trace() {
#ifdef HAVE_DEBUG_PORTS
    Sample x{cycle, top->debug_states, top->debug_load_done, top->debug_compute_done,
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
  int reg_write(uint32_t addr, uint32_t data) {
    top->s_axil_awaddr = addr;
    top->s_axil_awvalid = 1;
    top->s_axil_wdata = data;
    top->s_axil_wstrb = 0xF;
    top->s_axil_wvalid = 1;
    top->s_axil_bready = 1;
    top->eval();
    bool aw = false, w = false;
    for (int n = 0; n < 1000; n++) {
      bool awr = top->s_axil_awready, wr = top->s_axil_wready, bv = top->s_axil_bvalid;
      if (!tick()) return -1;
      if (awr && !aw) {
        aw = true;
        top->s_axil_awvalid = 0;
      }
      if (wr && !w) {
        w = true;
        top->s_axil_wvalid = 0;
      }
      if (bv) {
        top->s_axil_bready = 0;
        top->eval();
        return 0;
      }
      top->eval();
    }
    error = "protocol: AXI-Lite write got no response in 1000 cycles";
    return -1;
  }

  int64_t reg_read(uint32_t addr) {
    top->s_axil_araddr = addr;
    top->s_axil_arvalid = 1;
    top->s_axil_rready = 1;
    top->eval();
    bool ar = false;
    for (int n = 0; n < 1000; n++) {
      bool arr = top->s_axil_arready, rv = top->s_axil_rvalid;
      uint32_t rd = top->s_axil_rdata;
      if (!tick()) return -1;
      if (arr && !ar) {
        ar = true;
        top->s_axil_arvalid = 0;
      }
      if (rv) {
        top->s_axil_rready = 0;
        top->eval();
        return rd;
      }
      top->eval();
    }
    error = "protocol: AXI-Lite read got no response in 1000 cycles";
    return -1;
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
  s->drive();
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
  s->write_limit = write_limit;
  return s->mem.data();
}

EXPORT void tsim_config(void* p, uint32_t latency, uint32_t write_latency, double bandwidth,
                        double stall, uint64_t seed, uint32_t max_outstanding, int tracing) {
  Sim* s = static_cast<Sim*>(p);
  s->latency = latency < 1 ? 1 : latency;
  s->write_latency = write_latency < 1 ? 1 : write_latency;
  s->bandwidth = bandwidth;
  s->stall_threshold = uint32_t(stall * 4294967296.0);
  s->rng = seed * 0x9E3779B97F4A7C15ull + 1;
  s->max_outstanding = max_outstanding;
  s->tracing = tracing != 0;
}

EXPORT int tsim_reset(void* p, int cycles) {
  Sim* s = static_cast<Sim*>(p);
  s->top->rst = 1;
  for (int i = 0; i < cycles; i++)
    if (!s->tick()) return -1;
  s->top->rst = 0;
  s->reads.clear();
  s->writes.clear();
  s->bresp.clear();
  s->arready = s->rvalid = s->awready = s->wready = s->bvalid = false;
  s->drive();
  s->top->eval();
  return 0;
}

EXPORT int tsim_reg_write(void* p, uint32_t addr, uint32_t data) {
  return static_cast<Sim*>(p)->reg_write(addr, data);
}

EXPORT int64_t tsim_reg_read(void* p, uint32_t addr) {
  return static_cast<Sim*>(p)->reg_read(addr);
}

EXPORT uint64_t tsim_cycle(void* p) { return static_cast<Sim*>(p)->cycle; }

EXPORT const char* tsim_error(void* p) { return static_cast<Sim*>(p)->error.c_str(); }

// Run until the core raises `interrupt` (finished), at most max_cycles cycles. The watchdog:
// after idle_limit / 2 cycles without memory traffic, the progress registers are read through
// AXI-Lite (as a host would); unchanged for idle_limit cycles means deadlock. `progress` lists
// `n_progress` register addresses.
EXPORT int tsim_run(void* p, uint64_t max_cycles, uint64_t idle_limit, const uint32_t* progress,
                    int n_progress) {
  Sim* s = static_cast<Sim*>(p);
  uint64_t start = s->cycle;
  uint64_t last_progress = s->cycle;
  std::vector<int64_t> snap(n_progress, -1), cur(n_progress);
  bool have_snap = false;
  uint64_t next_check = 0;
  for (;;) {
    if (s->top->__SYM__interrupt) return FINISHED;  // Verilator renames `interrupt`
    if (max_cycles && s->cycle - start >= max_cycles) return CYCLE_LIMIT;
    if (!s->tick()) return ERROR;
    if (s->last_activity > last_progress) last_progress = s->last_activity;
    if (idle_limit && s->cycle - last_progress >= idle_limit / 2 && s->cycle >= next_check) {
      next_check = s->cycle + idle_limit / 8 + 1;
      for (int i = 0; i < n_progress; i++) {
        cur[i] = s->reg_read(progress[i]);
        if (cur[i] < 0) return ERROR;
      }
      if (!have_snap || cur != snap) {
        snap = cur;
        have_snap = true;
        last_progress = s->cycle;
      } else if (s->cycle - last_progress >= idle_limit) {
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
  out[0] = s->read_bursts;
  out[1] = s->write_bursts;
  out[2] = s->read_beats;
  out[3] = s->write_beats;
}
