# C[16x32] = clip((A[16x64] . B[32x64]^T) >> 6, 0, 127), int8, at the default config
# (1x16x16 GEMM core: an inp element is 1x16 values, a wgt element 16x16, an acc element 1x16).
#
# DRAM (byte addresses; dram_base counts elements of the memory type):
#   0     micro-ops (examples/matmul_uops.s)        uop element 0..4
#   64    A tiled: element (m, kb) = A[m, 16kb:16kb+16]        inp element 4 + 4m + kb
#   1280  B tiled: element (nb, kb) = B[16nb:.., 16kb:..]      wgt element 5 + 4nb + kb
#   3328  C tiled: element (m, nb) = C[m, 16nb:16nb+16]        out element 208 + 2m + nb
#
# One output tile of 16 x 2 accumulator entries (acc[2m + n]); K in two steps of 2 blocks. The
# input and weight buffers have two slots (inp 0-31 / 32-63, wgt 0-3 / 4-7), so the loads of
# step 1 run while the GEMM of step 0 computes (double buffering). Tokens: each weight load
# tells compute its step is ready (push_next / pop_prev); the last ALU tells store the result is
# ready; the store tells FINISH it is done.

load.uop sram_base=0  dram_base=0 y_size=1  x_size=5 x_stride=5          # micro-ops 0..4

# K step 0 -> slot 0                                                        (load module)
load.inp sram_base=0  dram_base=4 y_size=16 x_size=2 x_stride=4          # A[:, 0:32]
load.wgt sram_base=0  dram_base=5 y_size=2  x_size=2 x_stride=4 push_next # B[:, 0:32]
# K step 1 -> slot 1
load.inp sram_base=32 dram_base=6 y_size=16 x_size=2 x_stride=4          # A[:, 32:64]
load.wgt sram_base=4  dram_base=7 y_size=2  x_size=2 x_stride=4 push_next # B[:, 32:64]

# compute module: acc[2m + n] = 0, then += A[m, k] . B[n, k]^T over k (m = iter_out, n = iter_in)
gemm reset uop_bgn=4 uop_end=5 iter_out=16 iter_in=2 dst_factor_out=2 dst_factor_in=1
gemm uop_bgn=0 uop_end=2 iter_out=16 iter_in=2 dst_factor_out=2 dst_factor_in=1 src_factor_out=2 wgt_factor_in=2 pop_prev
gemm uop_bgn=2 uop_end=4 iter_out=16 iter_in=2 dst_factor_out=2 dst_factor_in=1 src_factor_out=2 wgt_factor_in=2 pop_prev

# requantise: >> 6, then clip to [0, 127] (a ReLU that also saturates)
alu.shr uop_bgn=4 uop_end=5 iter_out=16 iter_in=2 dst_factor_out=2 dst_factor_in=1 use_imm imm=6
alu.max uop_bgn=4 uop_end=5 iter_out=16 iter_in=2 dst_factor_out=2 dst_factor_in=1 use_imm imm=0
alu.min uop_bgn=4 uop_end=5 iter_out=16 iter_in=2 dst_factor_out=2 dst_factor_in=1 use_imm imm=127 push_next

# store module: 16 rows of 2 elements, truncated to int8 (low 8 bits)
store sram_base=0 dram_base=208 y_size=16 x_size=2 x_stride=2 pop_prev push_prev

finish pop_next
