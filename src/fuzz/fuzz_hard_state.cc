// Fuzz target: HardStateFile::Load on arbitrary file contents.
//
// Input: the file's bytes. Load must return OK or Status::Corruption (never
// crash); a state it loads must survive Save + Load, and since the format has
// exactly one encoding per state, saving it must reproduce the input bytes.
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz/fuzz_util.h"
#include "storage/hard_state_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace raftkv;
  using namespace raftkv::fuzz;
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::string path = FreshDir() + "/hard_state";
  WriteFile(path, input);
  HardStateFile file(path);
  HardState state;
  Status s = file.Load(&state);
  if (!s.ok()) {
    FUZZ_ASSERT(s.IsCorruption(), "not a corruption: %s", s.ToString().c_str());
    return 0;
  }
  s = file.Save(state);
  FUZZ_ASSERT(s.ok(), "save: %s", s.ToString().c_str());
  std::ifstream in(path, std::ios::binary);
  const std::string saved((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  FUZZ_ASSERT(saved == input, "loaded a file that does not re-encode to itself");
  HardState again;
  s = file.Load(&again);
  FUZZ_ASSERT(s.ok() && again == state, "reload: %s", s.ToString().c_str());
  return 0;
}
