// The table of garbled circuits the one op set GcGarble / GcEncode /
// GcEvaluate / GcMask runs (gc_ops.cc, gc_kernels.cc), chosen by the ops'
// `circuit` attribute. Each row binds a circuit family's core (garble.h: the
// comparator; leading_one.h; thresholds.h) to the uniform signatures below,
// so a new circuit is one core plus one row in circuit_table.cc: the ops,
// their shape functions and kernels read everything else (gate count,
// outputs, which attributes apply) from the row. No TensorFlow here, so the
// standalone tests can exercise the table (circuit_table_test.cc).
//
// The uniform view of a circuit: S1's input a and S2's input b are int64
// values of which the circuit reads the low `width` bits (all 64 for the
// comparator); per element there are `gates` AND gates (tables [n, gates, 4]
// as int64 (TG.lo, TG.hi, TE.lo, TE.hi)), input labels [n, width, 2] per
// party and K output bits (decode bits, masks and evaluated bits [n, K], or
// [n] for a one-bit circuit: the comparator keeps its vector shapes).
#ifndef TF_PRIVPY_OPS_GC_CIRCUIT_TABLE_H_
#define TF_PRIVPY_OPS_GC_CIRCUIT_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ops/common/parallel.h"
#include "ops/gc/garble.h"

namespace tf_privpy {
namespace gc {

// The ops' circuit parameters (their attributes), with the attributes'
// defaults. A row says which of them its circuit reads (CircuitDescriptor::
// params); the others must keep their defaults, so a parameter meant for
// another circuit is refused instead of silently ignored.
struct CircuitParams {
  int width = 0;                 // input bits per share (0: the circuit's own)
  bool magnitude = false;        // leading_one: one's complement magnitude
  std::vector<int> columns;      // leading_one: the outputs wanted (empty: all)
  int lo = 0;                    // thresholds: lowest bit of the window
  int window = 0;                // thresholds: window bits
  std::vector<int64_t> points;   // thresholds: the points c_k
};

// Bits of CircuitDescriptor::params.
enum CircuitParam : unsigned {
  kParamWidth = 1u << 0,
  kParamMagnitude = 1u << 1,
  kParamColumns = 1u << 2,
  kParamLo = 1u << 3,
  kParamWindow = 1u << 4,
  kParamPoints = 1u << 5,
};

// Input party: kPartyA is S1 (its share x1), kPartyB is S2 (x2, or -x2 for
// the comparator: the caller negates it).
enum class Party { kA, kB };

// One row of the table. Every function takes the row's parameters, already
// checked by `check` (the kernels check them once, at construction).
struct CircuitDescriptor {
  const char* name;       // the ops' `circuit` attribute
  const char* elements;   // what one element is, in errors ("comparisons")
  unsigned params;        // the CircuitParam bits this circuit reads
  bool one_bit;           // outputs are [n], not [n, K] (K = 1)
  int default_width;      // width when the attribute is 0 (0: it must be given)

  // "" if p is valid for this circuit (width 0 already resolved), else why not.
  std::string (*check)(const CircuitParams& p);
  int (*gates)(const CircuitParams& p);     // AND gates per element
  int (*outputs)(const CircuitParams& p);   // K, output bits per element

  // S1: tables and decode bits of elements [slice.first, slice.first +
  // slice.count) of a batch of slice.n.
  bool (*garble)(const uint8_t key12[16], uint64_t nonce, const BatchSlice& slice,
                 const CircuitParams& p, Block* tables, uint8_t* decode,
                 const ParallelFor& parallel_for, std::string* error);
  // S1 (kA) or S2 (kB): active labels [slice.count, width] of values.
  bool (*encode)(const uint8_t key12[16], uint64_t nonce, Party party,
                 const CircuitParams& p, const int64_t* values, const BatchSlice& slice,
                 Block* labels, const ParallelFor& parallel_for, std::string* error);
  // T1/T2: masked output bits of elements first_index .. first_index + n - 1.
  bool (*evaluate)(uint64_t nonce, int64_t first_index, int64_t n, const CircuitParams& p,
                   const Block* tables, const uint8_t* decode, const Block* labels_a,
                   const Block* labels_b, uint8_t* bits, const ParallelFor& parallel_for,
                   std::string* error);
  // S1 and S2: output masks [n, K].
  bool (*mask)(const uint8_t key12[16], uint64_t nonce, int64_t n, const CircuitParams& p,
               uint8_t* m, const ParallelFor& parallel_for, std::string* error);
};

// The row named `name`, or nullptr.
const CircuitDescriptor* FindCircuit(const std::string& name);

// The table's circuit names, quoted and comma-separated (for errors).
std::string CircuitNames();

// Resolves p.width (0: the circuit's default) and checks p against the row:
// "" if valid, else what is wrong and what to do.
std::string ResolveCircuitParams(const CircuitDescriptor& row, CircuitParams* p);

}  // namespace gc
}  // namespace tf_privpy

#endif  // TF_PRIVPY_OPS_GC_CIRCUIT_TABLE_H_
