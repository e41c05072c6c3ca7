// Bulk Verilator harness for a foreign design (testbenches/foreign/bulk.py generates the
// port-specific part from the port map, builds and drives it). No arithmetic here.
//
// Usage: Vtop STIMULUS TRACE RESULTS [PROBES]
//        Vtop --ceiling STIMULUS [CYCLES]
// Drives the map's handshake with the protocol of testbenches/foreign/tb.py (the cocotb test):
// instruction n is offered from the first cycle at or after the previous input handshake whose
// gap bit is 1 and held until taken; out_ready from the ready pattern. valid-ready: taken on
// in_valid & in_ready, a result read on out_valid & out_ready. pipeline: issued once INTERVAL
// cycles have passed since the last issue (in_valid high that cycle), read LATENCY cycles
// later. start-done: issued while idle with a one-cycle start, read on done. combinational:
// inputs set, eval, read; one "cycle" per instruction. Only instructions that end a dot
// product (n % per_dot == per_dot - 1) give results. A run stops once IDLE cycles pass with no
// handshake (start-done: IDLE cycles waiting for done). From the start, reset included, every
// driven port holds instruction 0's value (so a port the map ties holds its constant), as in
// the cocotb test.
//
// stimulus: u32 magic 'MXF1', u32 instructions, u32 ports, u32 gap pattern length,
//           u32 ready pattern length, u32 seed, u32 per_dot, u32 latency, u32 interval,
//           u32 idle, u32 reset cycles, u32 reset level, u32 words[ports],
//           u8 gaps[], u8 ready[], then per port u32 [instructions][words]
// trace:    the record mxsim.microarch.cycle.Trace.from_bytes reads: u32 magic 'MXT1', u32 0,
//           u64 cycles, u8 flags[cycles] (bit 0 in.valid, 1 in.ready, 2 out.valid,
//           3 out.ready), u32 low word of the first result port[cycles] (0 when not valid)
// results:  as testbenches.foreign.backend.read_results reads it: u32 magic 'MXR1', u32 ports,
//           u64 results, u32 words[ports], u64 cycle[results], then per port
//           u32 [results][words]
// Either way it prints one JSON line of its own timings on stdout: {"cycles", "load_s"
// (reading the stimulus), "loop_s" (the clocked loop), "write_s" (writing the records)}.
//
// --ceiling: Verilator's own speed on this model, the ceiling of any harness: after the same
// reset, CYCLES cycles (default: one per instruction) with in_valid and out_ready high and
// instruction c % instructions on the inputs, two evals a cycle (combinational: one), nothing
// recorded or checked (the outputs are XORed into a checksum the JSON line shows, so the
// compiler keeps every eval). Exact for valid-ready maps at full throughput; a pipeline or
// start-done map is driven as if it took an instruction every cycle.
//
// probes:   (with the map's [probes] only) as testbenches.foreign.probing.read_probes reads
//           it: u32 magic 'MXP1', u32 channels, per channel u32 bits, u32 words, u64 samples,
//           then per channel u32 [samples][words]; a channel's samples are the cycles its
//           strobe was 1, taken where results are read (after the inputs settle)

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "verilated.h"

// ---- whole-word access to any Verilated port type ---------------------------------------
template <class T> struct Words { static constexpr uint32_t n = sizeof(T) <= 4 ? 1 : 2; };
template <std::size_t N> struct Words<VlWide<N>> { static constexpr uint32_t n = N; };
template <class T, std::size_t N> struct Words<VlUnpacked<T, N>> {
    static constexpr uint32_t n = N * Words<T>::n;
};
template <class T, std::size_t N> struct Words<T[N]> { static constexpr uint32_t n = N * Words<T>::n; };
template <class T> static constexpr uint32_t words_of(const T&) { return Words<T>::n; }

template <class T> static inline void put(T& m, const uint32_t* w) {
    if constexpr (sizeof(T) <= 4) m = (T)w[0];
    else m = (T)((uint64_t)w[0] | ((uint64_t)w[1] << 32));
}
template <std::size_t N> static inline void put(VlWide<N>& m, const uint32_t* w) {
    memcpy(m.m_storage, w, N * 4);
}
template <class T, std::size_t N> static inline void put(VlUnpacked<T, N>& m, const uint32_t* w) {
    for (std::size_t i = 0; i < N; i++) put(m[i], w + i * Words<T>::n);
}
template <class T, std::size_t N> static inline void put(T (&m)[N], const uint32_t* w) {
    for (std::size_t i = 0; i < N; i++) put(m[i], w + i * Words<T>::n);
}

template <class T> static inline void get(const T& m, uint32_t* w) {
    if constexpr (sizeof(T) <= 4) w[0] = (uint32_t)m;
    else { w[0] = (uint32_t)m; w[1] = (uint32_t)((uint64_t)m >> 32); }
}
template <std::size_t N> static inline void get(const VlWide<N>& m, uint32_t* w) {
    memcpy(w, m.m_storage, N * 4);
}
template <class T> static inline uint32_t low32(const T& m) { return (uint32_t)m; }
template <std::size_t N> static inline uint32_t low32(const VlWide<N>& m) {
    return m.m_storage[0];
}

// A probe channel: a signal (Verilator scope, variable, element index or -1) sampled in every
// cycle its one-bit strobe (likewise) is 1 (testbenches/foreign/probing.py).
struct ProbeSpec {
    const char* scope; const char* var; int index;
    const char* strobe_scope; const char* strobe_var; int strobe_index;
};

// ---- the design's ports (generated from the port map) -----------------------------------
// @GENERATED@

// ---- probes: internal signals made public_flat_rd by a .vlt file, read in place ---------
#if N_PROBES
#include "verilated_syms.h"
static const uint8_t* probe_var(const char* scope, const char* var, int index, uint32_t* bytes,
                                uint32_t* bits) {
    const VerilatedScope* s = Verilated::threadContextp()->scopeFind(scope);
    const VerilatedVar* v = s ? s->varFind(var) : nullptr;
    if (!v) { fprintf(stderr, "harness: no public signal %s.%s\n", scope, var); exit(2); }
    void* p = v->datap();
    if (index >= 0) p = v->datapAdjustIndex(p, 1, index);
    if (!p) { fprintf(stderr, "harness: %s.%s has no element %d\n", scope, var, index); exit(2); }
    *bytes = v->entSize();
    *bits = (uint32_t)v->entBits();
    return (const uint8_t*)p;
}
struct Channel {
    const uint8_t* data; const uint8_t* strobe; uint32_t bytes, bits, words;
    std::vector<uint32_t> out;
};
struct Probes {
    Channel ch[N_PROBES];
    void init(uint32_t expect) {
        for (int j = 0; j < N_PROBES; j++) {
            const ProbeSpec& p = PROBE_SPECS[j];
            uint32_t sb, sbits;
            ch[j].data = probe_var(p.scope, p.var, p.index, &ch[j].bytes, &ch[j].bits);
            ch[j].strobe = probe_var(p.strobe_scope, p.strobe_var, p.strobe_index, &sb, &sbits);
            ch[j].words = (ch[j].bytes + 3) / 4;
            ch[j].out.reserve((size_t)expect * ch[j].words);
        }
    }
    inline void sample() {          // after the inputs settle, as the results are read
        for (int j = 0; j < N_PROBES; j++) {
            Channel& c = ch[j];
            if (!(*c.strobe & 1)) continue;
            const size_t at = c.out.size();
            c.out.resize(at + c.words);
            memcpy(&c.out[at], c.data, c.bytes);
        }
    }
    bool write(const char* path) {
        FILE* out = fopen(path, "wb");
        if (!out) { perror(path); return false; }
        const uint32_t head[2] = {0x3150584d, (uint32_t)N_PROBES};
        fwrite(head, 4, 2, out);
        for (int j = 0; j < N_PROBES; j++) {
            const uint32_t bw[2] = {ch[j].bits, ch[j].words};
            const uint64_t n = ch[j].out.size() / ch[j].words;
            fwrite(bw, 4, 2, out);
            fwrite(&n, 8, 1, out);
        }
        for (int j = 0; j < N_PROBES; j++) fwrite(ch[j].out.data(), 4, ch[j].out.size(), out);
        fclose(out);
        return true;
    }
};
#define PROBES_SAMPLE() run.probes.sample()
#else
struct Probes {};
#define PROBES_SAMPLE() ((void)0)
#endif

static void read_all(FILE* f, void* p, size_t n) {
    if (fread(p, 1, n, f) != n) { fprintf(stderr, "harness: short stimulus file\n"); exit(2); }
}

struct Run {
    Top* t;
    std::vector<const uint32_t*> in;            // per input port: its words, instruction-major
    std::vector<uint8_t> flags;                  // the trace, one entry per cycle
    std::vector<uint32_t> payload;
    std::vector<uint64_t> result_cycles;
    std::vector<std::vector<uint32_t>> results;  // per result port
    uint32_t result_words[N_RESULTS > 0 ? N_RESULTS : 1];
    Probes probes;

    void record(bool iv, bool ir, bool ov, bool o_r, uint32_t p) {
        flags.push_back((uint8_t)(iv | (ir << 1) | (ov << 2) | (o_r << 3)));
        payload.push_back(p);
    }
    void take(uint64_t c) {
        result_cycles.push_back(c);
        for (int j = 0; j < N_RESULTS; j++) {
            std::vector<uint32_t>& r = results[j];
            size_t at = r.size();
            r.resize(at + result_words[j]);
            read_result(t, j, &r[at]);
        }
    }
};

static double since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --ceiling (see the head of this file): the model's reset, then cycles with nothing recorded.
static void ceiling(Top* t, const uint32_t* const* in, uint32_t N, uint64_t cycles, double load) {
    uint32_t sum = 0;
    IN_VALID(1); OUT_READY(1);
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t c = 0; c < cycles; c++) {
        CLK(0);
        set_inputs(t, in, (uint32_t)(c % N));
        t->eval();
        sum ^= RESULT_LOW32() ^ ((uint32_t)OUT_VALID() << 1) ^ (uint32_t)IN_READY();
#if !(KIND_VALID_READY || KIND_PIPELINE || KIND_START_DONE)
        continue;                                // combinational: one eval a "cycle"
#endif
        CLK(1);
        t->eval();
    }
    printf("{\"cycles\": %llu, \"load_s\": %.6f, \"loop_s\": %.6f, \"write_s\": 0, "
           "\"checksum\": %u}\n", (unsigned long long)cycles, load, since(t0), sum);
}

int main(int argc, char** argv) {
    const bool ceiling_run = argc > 1 && !strcmp(argv[1], "--ceiling");
    if (ceiling_run) { argv++; argc--; }
    if (argc < (ceiling_run ? 2 : 4)) {
        fprintf(stderr, "usage: %s STIMULUS TRACE RESULTS | --ceiling STIMULUS [CYCLES]\n",
                argv[0]);
        return 2;
    }
    const auto t_load = std::chrono::steady_clock::now();
    FILE* f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    uint32_t h[12];
    read_all(f, h, sizeof h);
    if (h[0] != 0x3146584d) { fprintf(stderr, "harness: not a stimulus file\n"); return 2; }
    const uint32_t N = h[1], ports = h[2], plen = h[3], rlen = h[4], seed = h[5],
                   per_dot = h[6], latency = h[7], interval = h[8], idle = h[9],
                   reset_cycles = h[10], reset_level = h[11];
    if (ports != N_INPUTS || !plen || !rlen || !per_dot) {
        fprintf(stderr, "harness: the stimulus has %u ports, the harness %d\n", ports, N_INPUTS);
        return 2;
    }
    std::vector<uint32_t> words(ports + 1);
    read_all(f, words.data(), ports * 4);
    std::vector<uint8_t> gaps(plen), ready(rlen);
    read_all(f, gaps.data(), plen);
    read_all(f, ready.data(), rlen);
    std::vector<std::vector<uint32_t>> data(ports);
    for (uint32_t j = 0; j < ports; j++) {
        data[j].resize((size_t)N * words[j] + 1);
        read_all(f, data[j].data(), (size_t)N * words[j] * 4);
    }
    fclose(f);
    const double load = since(t_load);

    Verilated::randReset(2);          // registers start random: only the reset may set them
    Verilated::randSeed(seed + 1);
    Run run;
    run.t = new Top;
    Top* t = run.t;
    for (uint32_t j = 0; j < ports; j++) {
        if (words[j] != input_words(t, j)) {
            fprintf(stderr, "harness: input %u has %u words a value, the model %u\n", j,
                    words[j], input_words(t, j));
            return 2;
        }
        run.in.push_back(data[j].data());
    }
#if N_PROBES
    run.probes.init(N);
#endif
    run.results.resize(N_RESULTS);
    for (int j = 0; j < N_RESULTS; j++) {
        run.result_words[j] = result_words(t, j);
        run.results[j].reserve((size_t)(N / per_dot + 1) * run.result_words[j]);
    }
    run.flags.reserve((size_t)N * 2 + 1024);
    run.payload.reserve((size_t)N * 2 + 1024);
    run.result_cycles.reserve(N / per_dot + 1);
    std::vector<uint8_t> ends(N + 1);
    for (uint32_t n = 0; n < N; n++) ends[n] = n % per_dot == per_dot - 1;

    // Reset: clock low, handshake inputs low, the driven ports at instruction 0's values,
    // reset_cycles rising edges with reset active.
    if (N) set_inputs(t, run.in.data(), 0);
    CLK(0); IN_VALID(0); OUT_READY(0); RESET(reset_level);
    t->eval();
    for (uint32_t i = 0; i < reset_cycles; i++) { CLK(0); t->eval(); CLK(1); t->eval(); }
    RESET(!reset_level);
    if (ceiling_run) {
        if (!N) return 2;
        ceiling(t, run.in.data(), N, argc > 2 ? strtoull(argv[2], nullptr, 10) : N, load);
        t->final();
        delete t;
        return 0;
    }

    const auto t_loop = std::chrono::steady_clock::now();
    uint64_t c = 0, last = 0;
    uint32_t n = 0;
    bool offering = false, stuck = false;
#if KIND_VALID_READY
    size_t results = 0;
    const size_t want = N / per_dot;
    while (n < N || results < want) {
        CLK(0);
        if (!offering && n < N && gaps[c % plen]) { offering = true; set_inputs(t, run.in.data(), n); }
        IN_VALID(offering);
        const bool r = ready[c % rlen];
        OUT_READY(r);
        t->eval();
        PROBES_SAMPLE();
        const bool ir = IN_READY(), ov = OUT_VALID();
        run.record(offering, ir, ov, r, ov ? RESULT_LOW32() : 0u);
        if (offering && ir) { n++; offering = false; last = c; }
        if (ov && r) { run.take(c); results++; last = c; }
        c++;
        if (c - last > idle) { stuck = true; break; }
        CLK(1);
        t->eval();
    }
#elif KIND_PIPELINE
    std::vector<uint64_t> due(N + 1);            // issue n's read cycle
    uint32_t head = 0;                           // the next issue to read
    uint64_t ok = 0;                             // the first cycle an issue may come
    while (n < N || head < n) {
        CLK(0);
        if (!offering && n < N && gaps[c % plen]) offering = true;
        const bool issue = offering && c >= ok;
        if (issue) { set_inputs(t, run.in.data(), n); due[n] = c + latency; }
        IN_VALID(issue);
        t->eval();
        PROBES_SAMPLE();
        const bool read = head < n + issue && due[head] == c;
        const bool end = read && ends[head];
        const bool ov = HAS_OUT_VALID ? (bool)OUT_VALID() : end;
        run.record(offering, c >= ok, ov, true, ov ? RESULT_LOW32() : 0u);
        if (end) run.take(c);
        if (read) head++;
        if (issue) { n++; offering = false; ok = c + interval; }
        c++;
        CLK(1);
        t->eval();
    }
#elif KIND_START_DONE
    bool busy = false;
    uint64_t began = 0;
    while (n < N || busy) {
        CLK(0);
        if (!offering && n < N && gaps[c % plen]) offering = true;
        const bool issue = offering && !busy, idle_now = !busy;
        if (issue) { set_inputs(t, run.in.data(), n); busy = true; began = c; }
        IN_VALID(issue);
        t->eval();
        PROBES_SAMPLE();
        const bool d = OUT_VALID();
        run.record(offering, idle_now, d, true, d ? RESULT_LOW32() : 0u);
        if (d && busy) {
            if (ends[issue ? n : n - 1]) run.take(c);
            busy = false;
        }
        if (issue) { n++; offering = false; }
        c++;
        if (busy && c - began > idle) { stuck = true; break; }
        CLK(1);
        t->eval();
    }
#else  // combinational
    for (; n < N; n++, c++) {
        set_inputs(t, run.in.data(), n);
        t->eval();
        PROBES_SAMPLE();
        run.record(true, true, true, true, RESULT_LOW32());
        if (ends[n]) run.take(c);
    }
#endif
    (void)last; (void)latency; (void)interval; (void)idle; (void)stuck;
    const double loop = since(t_loop);
    const auto t_write = std::chrono::steady_clock::now();

    FILE* out = fopen(argv[2], "wb");
    if (!out) { perror(argv[2]); return 2; }
    const uint32_t thead[2] = {0x3154584d, 0};
    fwrite(thead, 4, 2, out);
    fwrite(&c, 8, 1, out);
    fwrite(run.flags.data(), 1, run.flags.size(), out);
    fwrite(run.payload.data(), 4, run.payload.size(), out);
    fclose(out);
    out = fopen(argv[3], "wb");
    if (!out) { perror(argv[3]); return 2; }
    const uint32_t rhead[2] = {0x3152584d, (uint32_t)N_RESULTS};
    const uint64_t nres = run.result_cycles.size();
    fwrite(rhead, 4, 2, out);
    fwrite(&nres, 8, 1, out);
    fwrite(run.result_words, 4, N_RESULTS, out);
    fwrite(run.result_cycles.data(), 8, nres, out);
    for (int j = 0; j < N_RESULTS; j++) fwrite(run.results[j].data(), 4, run.results[j].size(), out);
    fclose(out);
#if N_PROBES
    if (argc > 4 && !run.probes.write(argv[4])) return 2;
#endif
    printf("{\"cycles\": %llu, \"load_s\": %.6f, \"loop_s\": %.6f, \"write_s\": %.6f}\n",
           (unsigned long long)c, load, loop, since(t_write));
    t->final();
    delete t;
    return 0;
}
