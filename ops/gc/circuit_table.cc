// The rows of the circuit table (circuit_table.h): each adapts one circuit
// family's core to the uniform signatures. The adapters run once per kernel
// call; the cores' inner loops are untouched.
#include "ops/gc/circuit_table.h"

#include <iterator>
#include <string>

#include "ops/gc/garble.h"
#include "ops/gc/leading_one.h"
#include "ops/gc/thresholds.h"

namespace tf_privpy {
namespace gc {
namespace {

// ------------------------------------------------- compare (garble.h)
// PrivPy's comparator: a is S1's x1 (the core's role y), b is S2's -x2 (role
// x); the output bit is [a < b] as signed int64, i.e. [x1 + x2 < 0].

std::string CompareCheck(const CircuitParams& p) {
  if (p.width != kBits)
    return "the comparator reads all 64 bits of the shares: width must be 64 (or unset), got " +
           std::to_string(p.width);
  return "";
}
int CompareGates(const CircuitParams&) { return kBits; }
int CompareOutputs(const CircuitParams&) { return 1; }

bool CompareGarble(const uint8_t key12[16], uint64_t nonce, const BatchSlice& slice,
                   const CircuitParams&, Block* tables, uint8_t* decode,
                   const ParallelFor& parallel_for, std::string* error) {
  return Garble(key12, nonce, slice, tables, decode, parallel_for, error);
}
bool CompareEncode(const uint8_t key12[16], uint64_t nonce, Party party, const CircuitParams&,
                   const int64_t* values, const BatchSlice& slice, Block* labels,
                   const ParallelFor& parallel_for, std::string* error) {
  return EncodeInput(key12, nonce, party == Party::kA ? Role::kY : Role::kX, values, slice,
                     labels, parallel_for, error);
}
bool CompareEvaluate(uint64_t nonce, int64_t first_index, int64_t n, const CircuitParams&,
                     const Block* tables, const uint8_t* decode, const Block* labels_a,
                     const Block* labels_b, uint8_t* bits, const ParallelFor& parallel_for,
                     std::string* error) {
  // the core's x is S2's input (b), its y S1's (a)
  return Evaluate(nonce, first_index, n, tables, decode, labels_b, labels_a, bits, parallel_for,
                  error);
}
bool CompareMask(const uint8_t key12[16], uint64_t nonce, int64_t n, const CircuitParams&,
                 uint8_t* m, const ParallelFor& parallel_for, std::string* error) {
  return OutputMask(key12, nonce, n, m, parallel_for, error);
}

// ------------------------------------------- leading_one (leading_one.h)

LeadingOneSpec LoSpec(const CircuitParams& p) { return {p.width, p.magnitude, p.columns}; }
LoRole LoParty(Party party) { return party == Party::kA ? LoRole::kA : LoRole::kB; }

std::string LoCheck(const CircuitParams& p) {
  const std::string err = LeadingOneSpecError(LoSpec(p));
  return err.empty() ? err : err + " (the circuit reads the low 64 bits of the shares)";
}
int LoGates(const CircuitParams& p) { return LeadingOneAndGates(p.width, p.magnitude); }
int LoOutputs(const CircuitParams& p) { return LeadingOneOutputs(LoSpec(p)); }

bool LoGarble(const uint8_t key12[16], uint64_t nonce, const BatchSlice& slice,
              const CircuitParams& p, Block* tables, uint8_t* decode,
              const ParallelFor& parallel_for, std::string* error) {
  return LeadingOneGarble(key12, nonce, slice, LoSpec(p), tables, decode, parallel_for, error);
}
// Shared by the thresholds row: the two circuits' input labels have one layout.
bool LowBitsEncode(const uint8_t key12[16], uint64_t nonce, Party party, const CircuitParams& p,
                   const int64_t* values, const BatchSlice& slice, Block* labels,
                   const ParallelFor& parallel_for, std::string* error) {
  return LeadingOneEncode(key12, nonce, LoParty(party), p.width, values, slice, labels,
                          parallel_for, error);
}
bool LoEvaluate(uint64_t nonce, int64_t first_index, int64_t n, const CircuitParams& p,
                const Block* tables, const uint8_t* decode, const Block* labels_a,
                const Block* labels_b, uint8_t* bits, const ParallelFor& parallel_for,
                std::string* error) {
  return LeadingOneEvaluate(nonce, first_index, n, LoSpec(p), tables, decode, labels_a,
                            labels_b, bits, parallel_for, error);
}
bool LoMask(const uint8_t key12[16], uint64_t nonce, int64_t n, const CircuitParams& p,
            uint8_t* m, const ParallelFor& parallel_for, std::string* error) {
  return LeadingOneMask(key12, nonce, n, LoSpec(p), m, parallel_for, error);
}

// --------------------------------------------- thresholds (thresholds.h)

ThresholdsSpec ThSpec(const CircuitParams& p) { return {p.width, p.lo, p.window, p.points}; }

std::string ThCheck(const CircuitParams& p) {
  const std::string err = ThresholdsSpecError(ThSpec(p));
  return err.empty() ? err
                     : err + " (protocols/mpc/privpy/thresholds.py window() picks valid "
                             "parameters)";
}
int ThGates(const CircuitParams& p) { return ThresholdsAndGates(ThSpec(p)); }
int ThOutputs(const CircuitParams& p) { return static_cast<int>(p.points.size()); }

bool ThGarble(const uint8_t key12[16], uint64_t nonce, const BatchSlice& slice,
              const CircuitParams& p, Block* tables, uint8_t* decode,
              const ParallelFor& parallel_for, std::string* error) {
  return ThresholdsGarble(key12, nonce, slice, ThSpec(p), tables, decode, parallel_for, error);
}
bool ThEvaluate(uint64_t nonce, int64_t first_index, int64_t n, const CircuitParams& p,
                const Block* tables, const uint8_t* decode, const Block* labels_a,
                const Block* labels_b, uint8_t* bits, const ParallelFor& parallel_for,
                std::string* error) {
  return ThresholdsEvaluate(nonce, first_index, n, ThSpec(p), tables, decode, labels_a,
                            labels_b, bits, parallel_for, error);
}
bool ThMask(const uint8_t key12[16], uint64_t nonce, int64_t n, const CircuitParams& p,
            uint8_t* m, const ParallelFor& parallel_for, std::string* error) {
  return ThresholdsMask(key12, nonce, n, ThSpec(p), m, parallel_for, error);
}

// ------------------------------------------------------------- the table

const CircuitDescriptor kCircuits[] = {
    {"compare", "comparisons", kParamWidth, /*one_bit=*/true, /*default_width=*/kBits,
     CompareCheck, CompareGates, CompareOutputs, CompareGarble, CompareEncode, CompareEvaluate,
     CompareMask},
    {"leading_one", "elements", kParamWidth | kParamMagnitude | kParamColumns, false, 0,
     LoCheck, LoGates, LoOutputs, LoGarble, LowBitsEncode, LoEvaluate, LoMask},
    {"thresholds", "elements", kParamWidth | kParamLo | kParamWindow | kParamPoints, false, 0,
     ThCheck, ThGates, ThOutputs, ThGarble, LowBitsEncode, ThEvaluate, ThMask},
};

// The parameters a row does not read, set away from their defaults.
std::string UnusedParamsSet(const CircuitDescriptor& row, const CircuitParams& p) {
  const CircuitParams d;
  const struct {
    unsigned bit;
    const char* name;
    bool set;
  } attrs[] = {
      {kParamWidth, "width", p.width != d.width},
      {kParamMagnitude, "magnitude", p.magnitude != d.magnitude},
      {kParamColumns, "columns", p.columns != d.columns},
      {kParamLo, "lo", p.lo != d.lo},
      {kParamWindow, "window", p.window != d.window},
      {kParamPoints, "points", p.points != d.points},
  };
  std::string out;
  for (const auto& a : attrs)
    if (a.set && !(row.params & a.bit)) out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

}  // namespace

const CircuitDescriptor* FindCircuit(const std::string& name) {
  for (const CircuitDescriptor& row : kCircuits)
    if (name == row.name) return &row;
  return nullptr;
}

std::string CircuitNames() {
  std::string out;
  for (const CircuitDescriptor& row : kCircuits)
    out += (out.empty() ? "'" : ", '") + std::string(row.name) + "'";
  return out;
}

std::string ResolveCircuitParams(const CircuitDescriptor& row, CircuitParams* p) {
  const std::string unused = UnusedParamsSet(row, *p);
  if (!unused.empty())
    return std::string("circuit '") + row.name + "' takes no " + unused +
           ": leave those attributes at their defaults";
  if (p->width == 0) {
    if (row.default_width == 0)
      return std::string("circuit '") + row.name + "' needs its width (input bits per share)";
    p->width = row.default_width;
  }
  const std::string err = row.check(*p);
  return err.empty() ? err : std::string(row.name) + " circuit: " + err;
}

}  // namespace gc
}  // namespace tf_privpy
