#pragma once

// Names of files and directories that carry a log position: snapshot files
// (`snap-<index>-<term>.snap`) and checkpoints (`ckpt-<index>-<term>`), both
// numbers zero-padded to 20 digits so that names sort by position.

#include <cstdint>
#include <string>
#include <string_view>

namespace raftkv::position_name {

// Digits per number.
inline constexpr size_t kDigits = 20;

// `<prefix><index>-<term><suffix>`.
std::string Format(std::string_view prefix, uint64_t index, uint64_t term, std::string_view suffix = {});

// Whether `name` is exactly Format(prefix, i, t, suffix) for some i and t,
// both of which fit 64 bits; if so, sets them.
bool Parse(std::string_view name, std::string_view prefix, std::string_view suffix, uint64_t* index,
           uint64_t* term);

bool EndsWith(std::string_view s, std::string_view suffix);

// Whether `name` is one of RocksDB's table files, which never change once
// written (so they can be hard-linked, and their CRCs reused).
bool IsTableFile(std::string_view name);

}  // namespace raftkv::position_name
