// The processor's side of a Verilated VTA top, shared by every C++ harness: the tsim harness
// (hw/tsim/harness.cpp, the core) and the virtual boards (boards/virtual_board.cpp, a board's
// top). Two templates over a harness's naming of its top's ports:
//
// - vta_axi::Memory<Master>: a byte array behind the top's AXI4 master. INCR bursts, in-order
//   responses (one ID), up to `max_outstanding` bursts per direction, wstrb, a first-beat
//   latency, a write-response latency, a bandwidth limit (a token bucket shared by reads and
//   writes), optional random backpressure, protocol checks (burst type, beat size, 4 KiB
//   crossings, wlast). An access outside [base, base + size) either stops the model with an
//   `access:` error (tsim) or is answered with an error response, zero read data and nothing
//   written, as an interconnect does (`respond_errors`, the virtual boards).
// - vta_axi::lite_write / lite_read<Lite>: AXI4-Lite transactions as a CPU's store and load.
//
// `Master` and `Lite` are structs that name the ports. A harness declares them with the two
// macros below, from its top's type and its port prefixes (m_axi_ and s_axil_ on the core,
// m_axi_gmem_ and s_axi_control_ on a board's top), so that the list of ports is written once:
//
//   VTA_AXI_MASTER(Master, Vvta_core, m_axi_, BUS_BYTES);  // araddr() ... bready()
//   VTA_AXI_LITE(Lite, Vvta_core, s_axil_);                 // awaddr() ... rready()
//
// Per clock cycle a harness calls sample() with the clock low (the master's outputs settled),
// raises the clock, calls step() (the handshakes of the cycle that ended, then what the memory
// drives next) and drive(), and lowers the clock. This matches vta.hw.axi_model.AxiMemory: with
// the same latency, unlimited bandwidth and write latency 1 the two are cycle-identical.

#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <utility>

#include "verilated.h"

// The ports of an AXI4 master and of an AXI4-Lite slave, each as X(prefix, name).
#define VTA_AXI_MASTER_PORTS_(X, P)                                                           \
  X(P, araddr) X(P, arlen) X(P, arsize) X(P, arburst) X(P, arvalid) X(P, arready)           \
  X(P, rdata) X(P, rresp) X(P, rlast) X(P, rvalid) X(P, rready)                              \
  X(P, awaddr) X(P, awlen) X(P, awsize) X(P, awburst) X(P, awvalid) X(P, awready)           \
  X(P, wdata) X(P, wstrb) X(P, wlast) X(P, wvalid) X(P, wready)                              \
  X(P, bresp) X(P, bvalid) X(P, bready)
#define VTA_AXI_LITE_PORTS_(X, P)                                                             \
  X(P, awaddr) X(P, awvalid) X(P, awready) X(P, wdata) X(P, wstrb) X(P, wvalid) X(P, wready) \
  X(P, bresp) X(P, bvalid) X(P, bready) X(P, araddr) X(P, arvalid) X(P, arready)            \
  X(P, rdata) X(P, rresp) X(P, rvalid) X(P, rready)
#define VTA_AXI_PORT_(P, name) \
  static auto& name(Top& t) { return t.P##name; }

// struct NAME: the AXI4 master ports PREFIX<port> of TOP, a bus of BYTES bytes, for Memory<>.
#define VTA_AXI_MASTER(NAME, TOP, PREFIX, BYTES)      \
  struct NAME {                                       \
    using Top = TOP;                                  \
    static constexpr int bus_bytes = BYTES;           \
    VTA_AXI_MASTER_PORTS_(VTA_AXI_PORT_, PREFIX)      \
  }
// struct NAME: the AXI4-Lite slave ports PREFIX<port> of TOP, for lite_write / lite_read.
#define VTA_AXI_LITE(NAME, TOP, PREFIX)               \
  struct NAME {                                       \
    using Top = TOP;                                  \
    VTA_AXI_LITE_PORTS_(VTA_AXI_PORT_, PREFIX)        \
  }

namespace vta_axi {

enum Resp : uint32_t { OKAY = 0, SLVERR = 2, DECERR = 3 };

// A bus-wide Verilated signal to and from little-endian bytes: an integer of up to 64 bits, or
// a VlWide (wider buses).
template <class T>
void get_bytes(const T& sig, uint8_t* dst, int n) {
  uint64_t w = sig;
  memcpy(dst, &w, n);
}
template <std::size_t W>
void get_bytes(const VlWide<W>& sig, uint8_t* dst, int n) {
  for (int i = 0; i < n / 4; i++) {
    uint32_t w = sig[i];
    memcpy(dst + 4 * i, &w, 4);
  }
}
template <class T>
void put_bytes(T& sig, const uint8_t* src, int n) {
  uint64_t w = 0;
  memcpy(&w, src, n);
  sig = w;
}
template <std::size_t W>
void put_bytes(VlWide<W>& sig, const uint8_t* src, int n) {
  for (int i = 0; i < n / 4; i++) {
    uint32_t w;
    memcpy(&w, src + 4 * i, 4);
    sig[i] = w;
  }
}

struct Burst {
  uint64_t addr;   // start byte address (the master's view)
  uint32_t beats;
  uint32_t size;   // bytes per beat
  uint64_t ready;  // first cycle data may move
  uint32_t beat;
  uint32_t resp;   // OKAY, or the error response of an access outside the memory
  uint64_t word(int bus_bytes) const {  // the bus word of the current beat
    return ((addr & ~uint64_t(size - 1)) + uint64_t(beat) * size) & ~uint64_t(bus_bytes - 1);
  }
};

template <class Master>
class Memory {
 public:
  using Top = typename Master::Top;
  static constexpr int BUS = Master::bus_bytes;

  // the memory: `size` bytes at `data` (owned by the caller) mapped at `base`; a write at or
  // above the address `write_limit` is an error even inside the memory
  uint8_t* data = nullptr;
  uint64_t base = 0, size = 0, write_limit = UINT64_MAX;
  uint32_t latency = 1;        // cycles from the address handshake to the first data beat
  uint32_t write_latency = 1;  // cycles from the last write beat to the response
  uint32_t max_outstanding = 8;
  double bandwidth = 0.0;      // bytes per cycle; 0 = one bus word per cycle
  uint32_t stall_threshold = 0;  // random backpressure: stall when rng < threshold (of 2^32)
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  bool respond_errors = false;  // an access outside the memory: error response, not a stop
  uint32_t error_resp = DECERR;
  // counters
  uint64_t cycle = 0, last_activity = 0;
  uint64_t read_bursts = 0, write_bursts = 0, read_beats = 0, write_beats = 0;
  uint64_t error_bursts = 0;  // bursts answered with an error response
  std::string error;          // why step() stopped (or a protocol error, first only)

  // The master's outputs of a cycle; the payloads only where a handshake happens.
  struct Sample {
    bool ar = false, r = false, aw = false, w = false, b = false;
    uint64_t araddr = 0, awaddr = 0;
    uint32_t arlen = 0, arsize = 0, arburst = 0, awlen = 0, awsize = 0, awburst = 0;
    uint64_t wstrb = 0;
    bool wlast = false;
    uint8_t wdata[BUS];
  };

  Sample sample(Top& t) const {
    Sample s;
    s.ar = arready_ && Master::arvalid(t);
    s.r = rvalid_ && Master::rready(t);
    s.aw = awready_ && Master::awvalid(t);
    s.w = wready_ && Master::wvalid(t);
    s.b = bvalid_ && Master::bready(t);
    if (s.ar) {
      s.araddr = Master::araddr(t);
      s.arlen = Master::arlen(t);
      s.arsize = Master::arsize(t);
      s.arburst = Master::arburst(t);
    }
    if (s.aw) {
      s.awaddr = Master::awaddr(t);
      s.awlen = Master::awlen(t);
      s.awsize = Master::awsize(t);
      s.awburst = Master::awburst(t);
    }
    if (s.w) {
      get_bytes(Master::wdata(t), s.wdata, BUS);
      s.wstrb = Master::wstrb(t);
      s.wlast = Master::wlast(t);
    }
    return s;
  }

  // The handshakes of the cycle that ended, then what the memory drives in the next one.
  // False (with `error` set) on a protocol error or, without respond_errors, an access outside
  // the memory.
  bool step(const Sample& s) {
    if (s.ar && !accept_read(s)) return false;
    if (s.r) {
      Burst& h = reads_.front();
      if (++h.beat == h.beats) reads_.pop_front();
      read_beats++;
      last_activity = cycle;
    }
    if (s.aw) {
      Burst b;
      if (!open_burst("write", s.awaddr, s.awlen, s.awsize, s.awburst, &b)) return false;
      writes_.push_back(b);
      write_bursts++;
      last_activity = cycle;
    }
    if (s.w && !accept_write_beat(s)) return false;
    if (s.b) {
      bresps_.pop_front();
      last_activity = cycle;
    }
    cycle++;
    next_outputs(s.r, s.b);
    return true;
  }

  void drive(Top& t) const {
    Master::arready(t) = arready_;
    Master::rvalid(t) = rvalid_;
    Master::rlast(t) = rlast_;
    Master::rresp(t) = rresp_;
    put_bytes(Master::rdata(t), rdata_, BUS);
    Master::awready(t) = awready_;
    Master::wready(t) = wready_;
    Master::bvalid(t) = bvalid_;
    Master::bresp(t) = bresp_;
  }

  // Drop the bursts in flight and stop driving (the master was reset).
  void reset() {
    reads_.clear();
    writes_.clear();
    bresps_.clear();
    arready_ = rvalid_ = awready_ = wready_ = bvalid_ = false;
  }

 private:
  std::deque<Burst> reads_, writes_;
  std::deque<std::pair<uint64_t, uint32_t>> bresps_;  // (ready cycle, response)
  bool arready_ = false, rvalid_ = false, rlast_ = false, awready_ = false, wready_ = false,
       bvalid_ = false;
  uint32_t rresp_ = 0, bresp_ = 0;
  uint8_t rdata_[BUS] = {0};
  double credit_ = BUS;

  bool go() {
    if (!stall_threshold) return true;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return uint32_t(rng >> 16) >= stall_threshold;
  }

  bool fail(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    error = buf;
    return false;
  }

  bool open_burst(const char* kind, uint64_t addr, uint32_t len, uint32_t size_log,
                  uint32_t burst, Burst* out) {
    uint32_t beat_bytes = 1u << size_log;
    auto a = (unsigned long long)addr;
    if (burst != 1)
      return fail("protocol: %s burst at 0x%llx has burst type %u (only INCR=1)", kind, a, burst);
    if (beat_bytes > uint32_t(BUS))
      return fail("protocol: %s burst at 0x%llx of size %u exceeds the bus", kind, a,
                  beat_bytes);
    uint64_t start = addr & ~uint64_t(beat_bytes - 1);
    uint64_t end = start + uint64_t(len + 1) * beat_bytes;
    if (start / 4096 != (end - 1) / 4096)
      return fail("protocol: %s burst at 0x%llx of %u beats crosses 4 KiB", kind, a, len + 1);
    uint32_t resp = OKAY;
    if (start < base || end > base + size) {
      if (!respond_errors)
        return fail("access: the core %s bytes 0x%llx..0x%llx, beyond the %llu-byte memory (is "
                    "a dram_base or size out of range?)", kind[0] == 'r' ? "read" : "wrote", a,
                    (unsigned long long)(end - 1), (unsigned long long)size);
      resp = error_resp;
      error_bursts++;
    }
    *out = Burst{addr, len + 1, beat_bytes, cycle + (kind[0] == 'r' ? latency : 0), 0, resp};
    return true;
  }

  bool accept_read(const Sample& s) {
    Burst b;
    if (!open_burst("read", s.araddr, s.arlen, s.arsize, s.arburst, &b)) return false;
    reads_.push_back(b);
    read_bursts++;
    last_activity = cycle;
    return true;
  }

  bool accept_write_beat(const Sample& s) {
    Burst& h = writes_.front();
    bool last = h.beat == h.beats - 1;
    if (s.wlast != last)
      return fail("protocol: write burst at 0x%llx: wlast=%d on beat %u of %u",
                  (unsigned long long)h.addr, int(s.wlast), h.beat + 1, h.beats);
    uint64_t a = h.word(BUS);
    for (int i = 0; h.resp == OKAY && i < BUS; i++) {
      if (!(s.wstrb >> i & 1)) continue;
      if (a + i >= write_limit)
        return fail("access: the core wrote byte 0x%llx, beyond the %llu-byte DRAM image (is a "
                    "STORE's dram_base or size out of range?)", (unsigned long long)(a + i),
                    (unsigned long long)(write_limit - base));
      data[a - base + i] = s.wdata[i];
    }
    if (bandwidth > 0) credit_ -= BUS;
    h.beat++;
    write_beats++;
    if (last) {
      bresps_.push_back({cycle + write_latency, h.resp});
      writes_.pop_front();
    }
    last_activity = cycle;
    return true;
  }

  void next_outputs(bool r_done, bool b_done) {
    bool limited = bandwidth > 0;
    if (limited) {
      credit_ += bandwidth;
      if (credit_ > BUS) credit_ = BUS;
    }
    arready_ = reads_.size() < max_outstanding && go();
    awready_ = writes_.size() < max_outstanding && go();
    if (!rvalid_ || r_done) {
      rvalid_ = false;
      if (!reads_.empty()) {
        Burst& h = reads_.front();
        if (h.ready <= cycle && (!limited || credit_ >= BUS) && go()) {
          if (limited) credit_ -= BUS;
          rvalid_ = true;
          rlast_ = h.beat == h.beats - 1;
          rresp_ = h.resp;
          if (h.resp != OKAY) memset(rdata_, 0, BUS);
          else memcpy(rdata_, &data[h.word(BUS) - base], BUS);
        }
      }
    }
    wready_ = !writes_.empty() && (!limited || credit_ >= BUS) && go();
    if (!bvalid_ || b_done) {
      bvalid_ = !bresps_.empty() && bresps_.front().first <= cycle && go();
      bresp_ = bvalid_ ? bresps_.front().second : OKAY;
    }
  }
};

// AXI4-Lite transactions on the top's register port, as a CPU's store and load: the request is
// held until accepted while `tick()` runs the clock (false: the harness stopped), until the
// response arrives, for at most LITE_CYCLES cycles.
enum LiteStatus { LITE_OK = 0, LITE_STOPPED = -1, LITE_TIMEOUT = -2 };
constexpr int LITE_CYCLES = 1000;

template <class Lite, class Tick>
LiteStatus lite_write(typename Lite::Top& t, uint32_t addr, uint32_t value, Tick&& tick,
                      uint32_t* resp) {
  Lite::awaddr(t) = addr;
  Lite::awvalid(t) = 1;
  Lite::wdata(t) = value;
  Lite::wstrb(t) = 0xF;
  Lite::wvalid(t) = 1;
  Lite::bready(t) = 1;
  for (int n = 0; n < LITE_CYCLES; n++) {
    t.eval();
    bool awready = Lite::awready(t), wready = Lite::wready(t), bvalid = Lite::bvalid(t);
    uint32_t bresp = Lite::bresp(t);
    if (!tick()) return LITE_STOPPED;
    if (awready) Lite::awvalid(t) = 0;
    if (wready) Lite::wvalid(t) = 0;
    if (bvalid) {
      Lite::bready(t) = 0;
      t.eval();
      *resp = bresp;
      return LITE_OK;
    }
  }
  return LITE_TIMEOUT;
}

template <class Lite, class Tick>
LiteStatus lite_read(typename Lite::Top& t, uint32_t addr, Tick&& tick, uint32_t* value,
                     uint32_t* resp) {
  Lite::araddr(t) = addr;
  Lite::arvalid(t) = 1;
  Lite::rready(t) = 1;
  for (int n = 0; n < LITE_CYCLES; n++) {
    t.eval();
    bool arready = Lite::arready(t), rvalid = Lite::rvalid(t);
    uint32_t rdata = Lite::rdata(t), rresp = Lite::rresp(t);
    if (!tick()) return LITE_STOPPED;
    if (arready) Lite::arvalid(t) = 0;
    if (rvalid) {
      Lite::rready(t) = 0;
      t.eval();
      *value = rdata;
      *resp = rresp;
      return LITE_OK;
    }
  }
  return LITE_TIMEOUT;
}

}  // namespace vta_axi
