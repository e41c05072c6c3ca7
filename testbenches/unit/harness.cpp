// Bulk-mode Verilator harness for mx_dot (testbenches/unit/bulk.py builds and drives it).
// (Verilator spells the ports i__valid ... as i___05Fvalid ...: "__" is escaped.)
//
// Usage: Vmx_dot STIMULUS RESULT OUTPUTS (stop once OUTPUTS results have left).
// Reads a stimulus file, drives the generated Verilog with the testbenches' protocol
// (mxsim.microarch.cycle.TraceRecorder: beat n is offered from the first cycle whose gap bit is 1 and held
// until taken; o___05Fready from the ready pattern), and writes the whole trace as the record
// mxsim.microarch.cycle.Trace.from_bytes reads: every cycle's i.valid, i.ready, o.valid and o.ready and
// o.payload (0 when not valid). Python derives the handshakes and the results from it, compares
// them with the cycle model (cycles) and the numerics engine (values), and measures the
// handshake coverage. No arithmetic here.
//
// stimulus: u32 magic 'MXB1', u32 beats, u32 words per payload, u32 pattern length,
//           u32 seed, u8 gaps[pattern], u8 ready[pattern], u32 payload[beats][words]
// result:   the trace record: u32 magic 'MXT1', u32 0, u64 cycles,
//           u8 flags[cycles] (bit 0 i.valid, 1 i.ready, 2 o.valid, 3 o.ready),
//           u32 o_payload[cycles]

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "Vmx_dot.h"
#include "verilated.h"

static void read_all(FILE* f, void* p, size_t n) {
    if (fread(p, 1, n, f) != n) { fprintf(stderr, "harness: short stimulus file\n"); exit(2); }
}

int main(int argc, char** argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s STIMULUS RESULT\n", argv[0]); return 2; }
    FILE* in = fopen(argv[1], "rb");
    if (!in) { perror(argv[1]); return 2; }
    uint32_t hdr[5];
    read_all(in, hdr, sizeof hdr);
    if (hdr[0] != 0x3142584d) { fprintf(stderr, "harness: not a stimulus file\n"); return 2; }
    const uint32_t beats = hdr[1], words = hdr[2], plen = hdr[3], seed = hdr[4];
    std::vector<uint8_t> gaps(plen), ready(plen);
    read_all(in, gaps.data(), plen);
    read_all(in, ready.data(), plen);
    std::vector<uint32_t> payload((size_t)beats * words);
    read_all(in, payload.data(), payload.size() * 4);
    fclose(in);

    Verilated::randReset(2);          // registers start random: only the reset may set them
    Verilated::randSeed(seed + 1);
    Vmx_dot* top = new Vmx_dot;
    if (words != (sizeof(top->i___05Fpayload) + 3) / 4) {
        fprintf(stderr, "harness: payload of %u words, the model has %zu bytes\n", words,
                sizeof(top->i___05Fpayload));
        return 2;
    }
    top->clk = 0; top->rst = 1; top->i___05Fvalid = 0; top->o___05Fready = 0;
    for (int i = 0; i < 3; i++) { top->clk = 0; top->eval(); top->clk = 1; top->eval(); }
    top->rst = 0;

    size_t outputs = 0;
    std::vector<uint8_t> flags;             // the trace, one entry per cycle
    std::vector<uint32_t> o_payload;
    flags.reserve((size_t)beats * 4);
    o_payload.reserve((size_t)beats * 4);
    uint32_t n = 0;
    bool offering = false;
    uint64_t c = 0;
    const uint64_t limit = (uint64_t)beats * 64 + 1000000;
    size_t outputs_wanted = (size_t)strtoull(argc > 3 ? argv[3] : "0", nullptr, 10);
    while ((outputs < outputs_wanted || n < beats) && c < limit) {
        top->clk = 0;
        if (!offering && n < beats && gaps[c % plen]) offering = true;
        if (offering) {
            const uint32_t* p = &payload[(size_t)n * words];
            for (uint32_t w = 0; w < words; w++) top->i___05Fpayload[w] = p[w];
        }
        top->i___05Fvalid = offering;
        const bool o_ready = ready[c % plen];
        top->o___05Fready = o_ready;
        top->eval();
        const bool i_ready = top->i___05Fready, o_valid = top->o___05Fvalid;
        flags.push_back((uint8_t)(offering | (i_ready << 1) | (o_valid << 2) | (o_ready << 3)));
        o_payload.push_back(o_valid ? (uint32_t)top->o___05Fpayload : 0u);
        if (offering && i_ready) { n++; offering = false; }
        if (o_valid && o_ready) outputs++;
        top->clk = 1;
        top->eval();
        c++;
    }
    FILE* out = fopen(argv[2], "wb");
    if (!out) { perror(argv[2]); return 2; }
    const uint32_t head[2] = {0x3154584d, 0};
    fwrite(head, 4, 2, out);
    fwrite(&c, 8, 1, out);
    fwrite(flags.data(), 1, flags.size(), out);
    fwrite(o_payload.data(), 4, o_payload.size(), out);
    fclose(out);
    top->final();
    delete top;
    return c >= limit ? 1 : 0;
}
