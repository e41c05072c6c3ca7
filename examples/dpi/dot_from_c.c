/* dot_from_c.c: the exported C model called from a plain C program (docs/dpi.md).
 *
 *   mxsim export-c --unit blackwell-mxf8f6f4 -o build/mx --prefix dut_model
 *   cc -std=c99 -O2 -I build/mx examples/dpi/dot_from_c.c build/mx/dut_model.c \
 *      build/mx/mxsim_dot.c -o build/mx/dot_from_c && build/mx/dot_from_c
 *
 * One instruction of 32 E4M3 products (every element 1.0, 0x38), E8M0 scales 2^0 (127) and
 * C = 0.5: D = 32.5. Then the instruction's intermediates, and a dot of K = 128 (four
 * instructions chained). Written for mxsim's examples. */
#include <stdio.h>

#include "dut_model.h"

int main(void)
{
    dut_model_a_t a[128];
    dut_model_b_t b[128];
    dut_model_scale_t sa[4] = {127, 127, 127, 127}, sb[4] = {127, 127, 127, 127};
    mxsim_trace trace;
    uint32_t d;
    int i;
    for (i = 0; i < 128; i++) { a[i] = 0x38; b[i] = 0x38; }
    d = dut_model_instr_trace(a, b, sa, sb, 0x3F000000u, &trace);
    printf("D = 0x%08X\n", (unsigned)d);
    printf("step 0: E = %d, LSB 2^%d, aligned sum %lld\n", (int)trace.step[0].max_exp,
           (int)trace.step[0].lsb_exp, (long long)trace.step[0].sum);
    printf("K = 128: D = 0x%08X\n", (unsigned)dut_model_dot(128, a, b, sa, sb, 0x3F000000u));
    return d == 0x42020000u ? 0 : 1;
}
