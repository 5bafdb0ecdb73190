// The snapshot file format: an encoder that turns a point-in-time image of
// the state machine into framed chunks (SnapshotWriter), and a streaming
// decoder that checks every byte of a file while handing out its records
// (SnapshotReader). SnapshotStore (snapshot_store.h) manages the directory
// of files; KvStateMachine::Snapshot()/Restore() produce and consume the
// records.
//
// Layout (all integers little-endian):
//
//   file     := preamble header_frame data_frame* trailer_frame  <end of file>
//   preamble := magic "RKSN"  version:u32 (= 1)
//   frame    := kind:u8  length:u32  crc32c:u32  payload[length]
//               crc32c = CRC32C over kind, length and payload
//   kind 1 HEADER  payload = serialized raftkv.SnapshotHeader
//   kind 2 DATA    payload = record*   (a chunk: ~kChunkTargetBytes of records)
//   kind 3 TRAILER payload = record_count:u64  data_frame_count:u64
//                            file_crc32c:u32 (CRC32C of every byte of the
//                            file before the trailer frame)
//   record   := type:u8  length:varint32  message[length]
//   type 1 SESSION         raftkv.SnapshotSession
//   type 2 SESSION_RESULT  raftkv.SnapshotSessionResult
//   type 3 KV              raftkv.SnapshotKv
//
// Every frame is checksummed on its own (a reader streaming the file finds
// damage in the chunk where it is), the trailer must be the last bytes of
// the file (a torn file has no trailer, or a short frame), and the trailer
// repeats the record and chunk counts and a checksum of the whole file, so a
// dropped, repeated or reordered chunk is caught too. A reader reports
// Status::Corruption naming the file, the byte offset and what is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "storage/file_util.h"
#include "common/status.h"

namespace raftkv {

namespace internal {
class SnapshotHeader;
}  // namespace internal

namespace snapshot_format {
constexpr char kMagic[4] = {'R', 'K', 'S', 'N'};
constexpr uint32_t kVersion = 1;
constexpr size_t kPreambleBytes = 8;
constexpr size_t kFrameHeaderBytes = 9;  // kind, length, crc32c
constexpr size_t kTrailerPayloadBytes = 20;
// A DATA frame is closed once it holds at least this many bytes.
constexpr size_t kChunkTargetBytes = 256 * 1024;
enum FrameKind : uint8_t { kHeaderFrame = 1, kDataFrame = 2, kTrailerFrame = 3 };
}  // namespace snapshot_format

enum class SnapshotRecordType : uint8_t {
  kSession = 1,
  kSessionResult = 2,
  kKv = 3,
  kStore = 4,
  kHistory = 5,
};

// What a snapshot covers. last_index/last_term: the last log entry applied to
// the state (the log may be compacted up to it). config: the membership at
// that point, reserved as opaque bytes for membership change.
struct SnapshotMeta {
  uint64_t last_index = 0;
  uint64_t last_term = 0;
  uint64_t cluster_time_ms = 0;
  std::string config;
};

// Encodes a snapshot's records into chunk buffers (the payloads of the DATA
// frames). By default every chunk is kept in memory (about the size of the
// file), for SnapshotStore::Write() to frame and write afterwards. With
// SpillTo() each chunk goes to a sink as soon as it is full and its buffer is
// reused: SnapshotStore::WriteStreamed() writes the file while the records
// are encoded, in memory of one chunk.
class SnapshotWriter {
 public:
  explicit SnapshotWriter(size_t chunk_target_bytes = snapshot_format::kChunkTargetBytes);

  SnapshotMeta& meta() { return meta_; }
  const SnapshotMeta& meta() const { return meta_; }

  // Appends one record whose body is an already serialized message. A
  // message must be under 4 GiB (the length is a varint32; protobuf itself
  // stops at 2 GiB; keys and values are bounded far below by the service).
  void AddRecord(SnapshotRecordType type, std::string_view message);
  // Appends a SnapshotKv record, encoded directly (no message object: this
  // is the hot loop of a large snapshot).
  // The revisions and lease are written only when non-zero (proto3).
  void AddKv(std::string_view key, std::string_view value, int64_t create_revision = 0,
             int64_t mod_revision = 0, int64_t version = 0, int64_t lease = 0);

  // Hands every chunk, once full, to `spill` (which must not keep the
  // pointer) instead of keeping it. After the first error `spill` returns,
  // records are dropped and FinishSpill() returns that error. Call before
  // the first record.
  void SpillTo(std::function<Status(const std::string& chunk)> spill);
  // Spills the last chunk; the first error of any spill, or OK.
  Status FinishSpill();

  // The DATA frame payloads kept (with SpillTo: the one being filled), in
  // order. The last one may be empty.
  const std::vector<std::string>& chunks() const { return chunks_; }
  uint64_t record_count() const { return record_count_; }
  // Sum of the chunk sizes.
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  // The chunk to append `n` more bytes to (opens a new one when the current
  // one reached the target).
  std::string* ChunkFor(size_t n);

  size_t chunk_target_bytes_;
  SnapshotMeta meta_;
  std::vector<std::string> chunks_;
  std::function<Status(const std::string&)> spill_;
  Status spill_status_;
  uint64_t record_count_ = 0;
  uint64_t data_bytes_ = 0;
};

// Serializes a whole snapshot file (preamble, frames, trailer) into one
// string. SnapshotStore::Write() streams the same bytes to disk; this is for
// tests and small snapshots.
std::string EncodeSnapshotFile(const SnapshotWriter& writer);

// Calls `sink` with the consecutive pieces of the file encoding of `writer`
// (the concatenation is EncodeSnapshotFile()). Stops at the first error.
template <typename Sink>
Status ForEachSnapshotFilePiece(const SnapshotWriter& writer, Sink&& sink);

// Reads a snapshot file front to back, checking as it goes. Open() checks the
// preamble and the header frame; Next() returns the records one by one and,
// at the end, checks the trailer (counts, whole-file checksum, nothing after
// it) before reporting done. A consumer must therefore not treat what it read
// as valid until Next() said done (KvStateMachine::Restore() builds the new
// state aside and swaps it in only then). Reads the file in chunks: memory
// use is one frame, not the file.
class SnapshotReader {
 public:
  static Status Open(const std::string& path, std::unique_ptr<SnapshotReader>* out);

  const SnapshotMeta& meta() const { return meta_; }
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }

  // On success either *done is true (the whole file is verified; no more
  // records) or *type and *message hold the next record; *message stays
  // valid until the next call.
  Status Next(SnapshotRecordType* type, std::string_view* message, bool* done);

  // Reads every record to the end, checking that each message parses as its
  // type. For a file received from a peer, before installing it.
  Status VerifyAll();

 private:
  SnapshotReader() = default;
  // Reads the frame at offset_ into frame_ (checking its checksum and that it
  // fits in the file) and advances offset_.
  Status ReadFrame(uint8_t* kind);
  Status Corrupt(uint64_t offset, const std::string& what) const;

  file::File file_;
  std::string path_;
  uint64_t file_size_ = 0;
  uint64_t offset_ = 0;         // of the next frame
  uint32_t file_crc_ = 0;       // CRC32C of the bytes [0, offset_)
  SnapshotMeta meta_;
  std::string frame_;           // payload of the current DATA frame
  uint64_t frame_offset_ = 0;   // file offset of the current frame
  size_t pos_ = 0;              // next record within frame_
  uint64_t records_ = 0;
  uint64_t data_frames_ = 0;
  bool done_ = false;
};

// ---- implementation of the template ----

namespace snapshot_format {
// The frame header for `payload` of `kind`.
std::string FrameHeader(FrameKind kind, std::string_view payload);
// The whole trailer frame.
std::string TrailerFrame(uint64_t record_count, uint64_t data_frames, uint32_t file_crc);
std::string Preamble();
// The header frame payload for `meta`.
std::string HeaderPayload(const SnapshotMeta& meta);
uint32_t Crc(uint32_t crc, std::string_view bytes);
}  // namespace snapshot_format

template <typename Sink>
Status ForEachSnapshotFilePiece(const SnapshotWriter& writer, Sink&& sink) {
  namespace f = snapshot_format;
  uint32_t file_crc = 0;
  auto emit = [&](std::string_view piece) {
    file_crc = f::Crc(file_crc, piece);
    return sink(piece);
  };
  Status s = emit(f::Preamble());
  const std::string header = f::HeaderPayload(writer.meta());
  if (s.ok()) s = emit(f::FrameHeader(f::kHeaderFrame, header));
  if (s.ok()) s = emit(header);
  uint64_t data_frames = 0;
  for (const std::string& chunk : writer.chunks()) {
    if (!s.ok()) break;
    if (chunk.empty()) continue;
    s = emit(f::FrameHeader(f::kDataFrame, chunk));
    if (s.ok()) s = emit(chunk);
    ++data_frames;
  }
  if (s.ok()) {
    s = sink(std::string_view(f::TrailerFrame(writer.record_count(), data_frames, file_crc)));
  }
  return s;
}

}  // namespace raftkv
