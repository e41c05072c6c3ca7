// Bulk-mode Verilator harness for mx_dot (testbenches/unit/bulk.py builds and drives it).
// (Verilator spells the ports i__valid ... as i___05Fvalid ...: "__" is escaped.)
//
// Usage: Vmx_dot STIMULUS RESULT OUTPUTS (stop once OUTPUTS results have left)
//        Vmx_dot --ceiling STIMULUS [CYCLES]
// Reads a stimulus file, drives the generated Verilog with the testbenches' protocol
// (mxsim.microarch.cycle.TraceRecorder: beat n is offered from the first cycle whose gap bit is 1 and held
// until taken; o___05Fready from the ready pattern), and writes the whole trace as the record
// mxsim.microarch.cycle.Trace.from_bytes reads: every cycle's i.valid, i.ready, o.valid and o.ready and
// o.payload (0 when not valid). Python derives the handshakes and the results from it, compares
// them with the cycle model (cycles) and the numerics engine (values), and measures the
// handshake coverage. No arithmetic here. Either way it prints one JSON line of its own
// timings on stdout: {"cycles", "load_s" (reading the stimulus), "loop_s" (the clocked loop),
// "write_s" (writing the trace)}.
//
// --ceiling: Verilator's own speed on this model, the ceiling of any harness: after the same
// reset, CYCLES cycles (default: one per beat) with i.valid and o.ready high and beat c % beats
// on the payload, two evals a cycle as above, and nothing recorded or checked (the outputs are
// XORed into a checksum that the JSON line shows, so the compiler keeps every eval).
//
// stimulus: u32 magic 'MXB1', u32 beats, u32 words per payload, u32 pattern length,
//           u32 seed, u8 gaps[pattern], u8 ready[pattern], u32 payload[beats][words]
// result:   the trace record: u32 magic 'MXT1', u32 0, u64 cycles,
//           u8 flags[cycles] (bit 0 i.valid, 1 i.ready, 2 o.valid, 3 o.ready),
//           u32 o_payload[cycles]

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "Vmx_dot.h"
#include "verilated.h"

static void read_all(FILE* f, void* p, size_t n) {
    if (fread(p, 1, n, f) != n) { fprintf(stderr, "harness: short stimulus file\n"); exit(2); }
}

static double since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The stimulus file, read whole.
struct Stimulus {
    uint32_t beats, words, plen, seed;
    std::vector<uint8_t> gaps, ready;
    std::vector<uint32_t> payload;

    bool read(const char* path) {
        FILE* in = fopen(path, "rb");
        if (!in) { perror(path); return false; }
        uint32_t hdr[5];
        read_all(in, hdr, sizeof hdr);
        if (hdr[0] != 0x3142584d) { fprintf(stderr, "harness: not a stimulus file\n"); return false; }
        beats = hdr[1]; words = hdr[2]; plen = hdr[3]; seed = hdr[4];
        gaps.resize(plen);
        ready.resize(plen);
        read_all(in, gaps.data(), plen);
        read_all(in, ready.data(), plen);
        payload.resize((size_t)beats * words);
        read_all(in, payload.data(), payload.size() * 4);
        fclose(in);
        return true;
    }
};

// The model after the reset: registers random (Verilated::randReset(2)), so only the reset
// may set them; nullptr when the payload does not fit the model.
static Vmx_dot* reset_model(const Stimulus& s) {
    Verilated::randReset(2);
    Verilated::randSeed(s.seed + 1);
    Vmx_dot* top = new Vmx_dot;
    if (s.words != (sizeof(top->i___05Fpayload) + 3) / 4) {
        fprintf(stderr, "harness: payload of %u words, the model has %zu bytes\n", s.words,
                sizeof(top->i___05Fpayload));
        return nullptr;
    }
    top->clk = 0; top->rst = 1; top->i___05Fvalid = 0; top->o___05Fready = 0;
    for (int i = 0; i < 3; i++) { top->clk = 0; top->eval(); top->clk = 1; top->eval(); }
    top->rst = 0;
    return top;
}

static inline void put_payload(Vmx_dot* top, const uint32_t* p, uint32_t words) {
    memcpy(&top->i___05Fpayload[0], p, (size_t)words * 4);
}

static int ceiling(int argc, char** argv) {
    const auto t0 = std::chrono::steady_clock::now();
    Stimulus s;
    if (argc < 3 || !s.read(argv[2]) || !s.beats) return 2;
    const double load = since(t0);
    Vmx_dot* top = reset_model(s);
    if (!top) return 2;
    const uint64_t cycles = argc > 3 ? strtoull(argv[3], nullptr, 10) : s.beats;
    uint32_t sum = 0;
    top->i___05Fvalid = 1;
    top->o___05Fready = 1;
    const auto t1 = std::chrono::steady_clock::now();
    for (uint64_t c = 0; c < cycles; c++) {
        top->clk = 0;
        put_payload(top, &s.payload[(size_t)(c % s.beats) * s.words], s.words);
        top->eval();
        sum ^= (uint32_t)top->o___05Fpayload ^ ((uint32_t)top->o___05Fvalid << 1)
               ^ (uint32_t)top->i___05Fready;
        top->clk = 1;
        top->eval();
    }
    const double loop = since(t1);
    printf("{\"cycles\": %llu, \"load_s\": %.6f, \"loop_s\": %.6f, \"write_s\": 0, "
           "\"checksum\": %u}\n", (unsigned long long)cycles, load, loop, sum);
    top->final();
    delete top;
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && !strcmp(argv[1], "--ceiling")) return ceiling(argc, argv);
    if (argc < 3) { fprintf(stderr, "usage: %s STIMULUS RESULT\n", argv[0]); return 2; }
    const auto t0 = std::chrono::steady_clock::now();
    Stimulus s;
    if (!s.read(argv[1])) return 2;
    const double load = since(t0);
    Vmx_dot* top = reset_model(s);
    if (!top) return 2;
    const uint32_t beats = s.beats, words = s.words, plen = s.plen;
    const uint8_t* gaps = s.gaps.data();
    const uint8_t* ready = s.ready.data();

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
    const auto t1 = std::chrono::steady_clock::now();
    while ((outputs < outputs_wanted || n < beats) && c < limit) {
        top->clk = 0;
        if (!offering && n < beats && gaps[c % plen]) offering = true;
        if (offering) put_payload(top, &s.payload[(size_t)n * words], words);
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
    const double loop = since(t1);
    const auto t2 = std::chrono::steady_clock::now();
    FILE* out = fopen(argv[2], "wb");
    if (!out) { perror(argv[2]); return 2; }
    const uint32_t head[2] = {0x3154584d, 0};
    fwrite(head, 4, 2, out);
    fwrite(&c, 8, 1, out);
    fwrite(flags.data(), 1, flags.size(), out);
    fwrite(o_payload.data(), 4, o_payload.size(), out);
    fclose(out);
    printf("{\"cycles\": %llu, \"load_s\": %.6f, \"loop_s\": %.6f, \"write_s\": %.6f}\n",
           (unsigned long long)c, load, loop, since(t2));
    top->final();
    delete top;
    return c >= limit ? 1 : 0;
}
