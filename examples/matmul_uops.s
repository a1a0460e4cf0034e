# Micro-ops of examples/matmul.s (one 32-bit word each, loaded by its first instruction).
# A micro-op holds base indices into the accumulator (dst), input (src) and weight (wgt)
# buffers; GEMM/ALU loops add o*factor_out + i*factor_in to each.
uop dst_idx=0 src_idx=0  wgt_idx=0   # 0: GEMM, K step 0, k block 0 (buffer slot 0)
uop dst_idx=0 src_idx=1  wgt_idx=1   # 1: GEMM, K step 0, k block 1
uop dst_idx=0 src_idx=32 wgt_idx=4   # 2: GEMM, K step 1, k block 0 (buffer slot 1)
uop dst_idx=0 src_idx=33 wgt_idx=5   # 3: GEMM, K step 1, k block 1
uop dst_idx=0 src_idx=0  wgt_idx=0   # 4: reset and ALU steps (acc[m*2 + n])
