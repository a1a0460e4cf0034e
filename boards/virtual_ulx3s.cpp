// The virtual ULX3S: the generated top vta_ulx3s_top (serial bridge, on-chip device memory,
// power-on reset, the VTA core) under Verilator, with the board's USB serial port modelled as
// a UART at `divisor` clock cycles per bit (8N1) on ftdi_txd (host -> FPGA) and ftdi_rxd
// (FPGA -> host). The ECP5 PLL is the lint stub (CLKOP = CLKI, always locked): the simulated
// clock is the core clock, so the divisor is the one the top was built with.
// Built by vta.boards.virtual; driven through the C ABI below.

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "verilated.h"
#include "Vvta_ulx3s_top.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Board {
  std::unique_ptr<VerilatedContext> ctx;
  std::unique_ptr<Vvta_ulx3s_top> top;
  uint32_t divisor = 868;
  uint64_t cycle = 0;
  // host -> FPGA: the line level of each remaining bit period
  std::deque<int> tx_bits;
  uint32_t tx_timer = 0;
  // FPGA -> host receiver
  int rx_state = 0;  // 0 idle, 1 data bits, 2 stop bit
  uint32_t rx_timer = 0, rx_bit = 0, rx_shift = 0;
  std::deque<uint8_t> received;
  std::string error;

  Board() : ctx(new VerilatedContext), top(new Vvta_ulx3s_top(ctx.get(), "top")) {
    top->clk_25mhz = 0;
    top->ftdi_txd = 1;
    top->eval();
  }

  void tick() {
    // host transmitter: one line level per bit period
    if (tx_timer == 0 && !tx_bits.empty()) {
      top->ftdi_txd = tx_bits.front();
      tx_bits.pop_front();
      tx_timer = divisor;
    }
    if (tx_timer) tx_timer--;
    if (tx_timer == 0 && tx_bits.empty()) top->ftdi_txd = 1;
    top->clk_25mhz = 1;
    top->eval();
    top->clk_25mhz = 0;
    top->eval();
    cycle++;
    // host receiver: start bit edge, then sample in the middle of each bit
    int line = top->ftdi_rxd;
    switch (rx_state) {
      case 0:
        if (!line) {
          rx_state = 1;
          rx_timer = divisor + divisor / 2;
          rx_bit = 0;
          rx_shift = 0;
        }
        break;
      case 1:
        if (--rx_timer == 0) {
          rx_shift |= uint32_t(line) << rx_bit;
          rx_timer = divisor;
          if (++rx_bit == 8) rx_state = 2;
        }
        break;
      case 2:
        if (--rx_timer == 0) {
          if (!line && error.empty()) error = "serial: missing stop bit";
          received.push_back(uint8_t(rx_shift));
          rx_state = 0;
        }
        break;
    }
  }
};

}  // namespace

EXPORT void* vu_create(uint32_t divisor) {
  Board* b = new Board;
  b->divisor = divisor;
  return b;
}
EXPORT void vu_free(void* p) {
  Board* b = static_cast<Board*>(p);
  b->top->final();
  delete b;
}
EXPORT void vu_run(void* p, uint64_t cycles) {
  Board* b = static_cast<Board*>(p);
  for (uint64_t i = 0; i < cycles; i++) b->tick();
}
EXPORT uint64_t vu_cycle(void* p) { return static_cast<Board*>(p)->cycle; }
EXPORT uint32_t vu_leds(void* p) { return static_cast<Board*>(p)->top->led; }
EXPORT const char* vu_error(void* p) { return static_cast<Board*>(p)->error.c_str(); }

// Queue bytes for the host transmitter and run until they are sent.
EXPORT void vu_send(void* p, const uint8_t* data, uint32_t n) {
  Board* b = static_cast<Board*>(p);
  for (uint32_t i = 0; i < n; i++) {
    b->tx_bits.push_back(0);
    for (int k = 0; k < 8; k++) b->tx_bits.push_back(data[i] >> k & 1);
    b->tx_bits.push_back(1);
  }
  while (!b->tx_bits.empty() || b->tx_timer) b->tick();
}
// Run until `n` bytes were received (or `max_cycles` passed); returns the number copied.
EXPORT uint32_t vu_recv(void* p, uint8_t* out, uint32_t n, uint64_t max_cycles) {
  Board* b = static_cast<Board*>(p);
  for (uint64_t i = 0; b->received.size() < n && i < max_cycles; i++) b->tick();
  uint32_t got = 0;
  while (got < n && !b->received.empty()) {
    out[got++] = b->received.front();
    b->received.pop_front();
  }
  return got;
}
