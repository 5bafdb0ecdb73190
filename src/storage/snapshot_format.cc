#include "storage/snapshot_format.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "proto/internal.h"
#include "storage/coding.h"
#include "storage/crc32c.h"

namespace raftkv {
namespace {

using snapshot_format::Crc;
using snapshot_format::kDataFrame;
using snapshot_format::kFrameHeaderBytes;
using snapshot_format::kHeaderFrame;
using snapshot_format::kMagic;
using snapshot_format::kPreambleBytes;
using snapshot_format::kTrailerFrame;
using snapshot_format::kTrailerPayloadBytes;
using snapshot_format::kVersion;

void PutVarint32(std::string* out, uint32_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutVarint64(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

size_t Varint64Size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

size_t Varint32Size(uint32_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Decodes a varint32 at data[*pos, size); false if it is truncated or longer
// than 5 bytes / 32 bits.
bool GetVarint32(const std::string& data, size_t* pos, uint32_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 28 && *pos < data.size(); shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(data[(*pos)++]);
    result |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) {
      if (result > UINT32_MAX) return false;
      *v = static_cast<uint32_t>(result);
      return true;
    }
  }
  return false;
}

}  // namespace

namespace snapshot_format {

uint32_t Crc(uint32_t crc, std::string_view bytes) {
  return crc32c::Extend(crc, bytes.data(), bytes.size());
}

std::string Preamble() {
  std::string out(kMagic, sizeof(kMagic));
  coding::PutFixed32(&out, kVersion);
  return out;
}

std::string FrameHeader(FrameKind kind, std::string_view payload) {
  std::string out;
  out.push_back(static_cast<char>(kind));
  coding::PutFixed32(&out, static_cast<uint32_t>(payload.size()));
  uint32_t crc = Crc(0, out);
  crc = Crc(crc, payload);
  coding::PutFixed32(&out, crc);
  return out;
}

std::string TrailerFrame(uint64_t record_count, uint64_t data_frames, uint32_t file_crc) {
  std::string payload;
  coding::PutFixed64(&payload, record_count);
  coding::PutFixed64(&payload, data_frames);
  coding::PutFixed32(&payload, file_crc);
  return FrameHeader(kTrailerFrame, payload) + payload;
}

std::string HeaderPayload(const SnapshotMeta& meta) {
  SnapshotHeader header;
  header.set_last_index(meta.last_index);
  header.set_last_term(meta.last_term);
  header.set_cluster_time_ms(meta.cluster_time_ms);
  header.set_config(meta.config);
  return header.SerializeAsString();
}

}  // namespace snapshot_format

// ---- SnapshotWriter ----

SnapshotWriter::SnapshotWriter(size_t chunk_target_bytes)
    : chunk_target_bytes_(std::max<size_t>(chunk_target_bytes, 1)) {}

void SnapshotWriter::SpillTo(std::function<Status(const std::string& chunk)> spill) {
  spill_ = std::move(spill);
}

Status SnapshotWriter::FinishSpill() {
  if (spill_ && spill_status_.ok() && !chunks_.empty() && !chunks_.back().empty()) {
    spill_status_ = spill_(chunks_.back());
    chunks_.back().clear();
  }
  return spill_status_;
}

std::string* SnapshotWriter::ChunkFor(size_t n) {
  if (spill_ && !chunks_.empty() && chunks_.back().size() >= chunk_target_bytes_) {
    // The full chunk goes to the file; its buffer takes the next records
    // (after an error they are dropped there too: nothing more is written).
    if (spill_status_.ok()) spill_status_ = spill_(chunks_.back());
    chunks_.back().clear();
  } else if (chunks_.empty() || chunks_.back().size() >= chunk_target_bytes_) {
    chunks_.emplace_back();
    // Reserve a little over the target so the usual chunk never reallocates.
    chunks_.back().reserve(std::max(chunk_target_bytes_ + 256, n));
  }
  data_bytes_ += n;
  ++record_count_;
  return &chunks_.back();
}

void SnapshotWriter::AddRecord(SnapshotRecordType type, std::string_view message) {
  const uint32_t len = static_cast<uint32_t>(message.size());
  std::string* chunk = ChunkFor(1 + Varint32Size(len) + message.size());
  chunk->push_back(static_cast<char>(type));
  PutVarint32(chunk, len);
  chunk->append(message.data(), message.size());
}

void SnapshotWriter::AddKv(std::string_view key, std::string_view value, int64_t create_revision,
                           int64_t mod_revision, int64_t version, int64_t lease) {
  // SnapshotKv wire format: field 1 (key) and field 2 (value), both
  // length-delimited: tag 0x0A / 0x12, varint length, bytes. Both fields are
  // always written (an empty value too; parsers accept that). Fields 3-6
  // (varints, tags 0x18 0x20 0x28 0x30) only when non-zero.
  const uint32_t klen = static_cast<uint32_t>(key.size());
  const uint32_t vlen = static_cast<uint32_t>(value.size());
  const int64_t ints[4] = {create_revision, mod_revision, version, lease};
  size_t msg = 1 + Varint32Size(klen) + klen + 1 + Varint32Size(vlen) + vlen;
  for (int64_t v : ints) {
    if (v != 0) msg += 1 + Varint64Size(static_cast<uint64_t>(v));
  }
  std::string* chunk =
      ChunkFor(1 + Varint32Size(static_cast<uint32_t>(msg)) + msg);
  chunk->push_back(static_cast<char>(SnapshotRecordType::kKv));
  PutVarint32(chunk, static_cast<uint32_t>(msg));
  chunk->push_back(0x0A);
  PutVarint32(chunk, klen);
  chunk->append(key.data(), key.size());
  chunk->push_back(0x12);
  PutVarint32(chunk, vlen);
  chunk->append(value.data(), value.size());
  for (int i = 0; i < 4; ++i) {
    if (ints[i] == 0) continue;
    chunk->push_back(static_cast<char>((3 + i) << 3));
    PutVarint64(chunk, static_cast<uint64_t>(ints[i]));
  }
}

std::string EncodeSnapshotFile(const SnapshotWriter& writer) {
  std::string out;
  out.reserve(writer.data_bytes() + 1024);
  ForEachSnapshotFilePiece(writer, [&out](std::string_view piece) {
    out.append(piece.data(), piece.size());
    return Status::OK();
  });
  return out;
}

// ---- SnapshotReader ----

Status SnapshotReader::Corrupt(uint64_t offset, const std::string& what) const {
  return Status::Corruption(path_ + ": offset " + std::to_string(offset) + ": " + what);
}

Status SnapshotReader::Open(const std::string& path, std::unique_ptr<SnapshotReader>* out) {
  std::unique_ptr<SnapshotReader> r(new SnapshotReader());
  r->path_ = path;
  Status s = file::File::Open(path, file::OpenMode::kReadOnly, &r->file_);
  if (s.ok()) s = r->file_.Size(&r->file_size_);
  if (!s.ok()) return s;

  std::string preamble;
  s = r->file_.ReadAt(0, kPreambleBytes, &preamble);
  if (!s.ok()) return s;
  if (preamble.size() < kPreambleBytes) {
    return r->Corrupt(0, "file is " + std::to_string(r->file_size_) +
                             " bytes, too short for a snapshot preamble");
  }
  if (std::memcmp(preamble.data(), kMagic, sizeof(kMagic)) != 0) {
    return r->Corrupt(0, "bad magic (not a raftkv snapshot file)");
  }
  const uint32_t version = coding::DecodeFixed32(preamble.data() + 4);
  if (version != kVersion) {
    return r->Corrupt(4, "unsupported snapshot version " + std::to_string(version));
  }
  r->file_crc_ = Crc(0, preamble);
  r->offset_ = kPreambleBytes;

  const uint64_t header_offset = r->offset_;
  uint8_t kind = 0;
  s = r->ReadFrame(&kind);
  if (!s.ok()) return s;
  if (kind != kHeaderFrame) {
    return r->Corrupt(header_offset, "first frame is of kind " + std::to_string(kind) +
                                         ", expected the header frame");
  }
  SnapshotHeader header;
  if (!header.ParseFromString(r->frame_)) {
    return r->Corrupt(header_offset, "header frame does not parse as SnapshotHeader");
  }
  r->meta_.last_index = header.last_index();
  r->meta_.last_term = header.last_term();
  r->meta_.cluster_time_ms = header.cluster_time_ms();
  r->meta_.config = header.config();
  r->frame_.clear();
  r->pos_ = 0;
  *out = std::move(r);
  return Status::OK();
}

Status SnapshotReader::ReadFrame(uint8_t* kind) {
  frame_offset_ = offset_;
  if (file_size_ - offset_ < kFrameHeaderBytes) {
    return Corrupt(offset_, "file ends inside a frame header (" +
                                std::to_string(file_size_ - offset_) + " of " +
                                std::to_string(kFrameHeaderBytes) +
                                " bytes): truncated, no trailer");
  }
  std::string buf;
  Status s = file_.ReadAt(offset_, kFrameHeaderBytes, &buf);
  if (!s.ok()) return s;
  if (buf.size() < kFrameHeaderBytes) return Corrupt(offset_, "short read of a frame header");
  *kind = static_cast<uint8_t>(buf[0]);
  const uint64_t length = coding::DecodeFixed32(buf.data() + 1);
  const uint32_t stored_crc = coding::DecodeFixed32(buf.data() + 5);
  const uint64_t available = file_size_ - offset_ - kFrameHeaderBytes;
  if (length > available) {
    return Corrupt(offset_, "frame length " + std::to_string(length) + " but only " +
                                std::to_string(available) +
                                " bytes follow: truncated or damaged length");
  }
  s = file_.ReadAt(offset_ + kFrameHeaderBytes, length, &frame_);
  if (!s.ok()) return s;
  if (frame_.size() != length) return Corrupt(offset_, "short read of a frame payload");
  uint32_t crc = crc32c::Value(buf.data(), 5);
  crc = Crc(crc, frame_);
  if (crc != stored_crc) {
    return Corrupt(offset_, "frame checksum mismatch (kind " + std::to_string(*kind) +
                                ", length " + std::to_string(length) + ")");
  }
  file_crc_ = Crc(file_crc_, std::string_view(buf.data(), kFrameHeaderBytes));
  file_crc_ = Crc(file_crc_, frame_);
  offset_ += kFrameHeaderBytes + length;
  return Status::OK();
}

Status SnapshotReader::Next(SnapshotRecordType* type, std::string_view* message, bool* done) {
  *done = false;
  if (done_) {
    *done = true;
    return Status::OK();
  }
  while (pos_ >= frame_.size()) {
    // Next frame: DATA or the trailer.
    const uint32_t crc_before = file_crc_;
    const uint64_t at = offset_;
    uint8_t kind = 0;
    Status s = ReadFrame(&kind);
    if (!s.ok()) return s;
    if (kind == kDataFrame) {
      ++data_frames_;
      pos_ = 0;
      continue;
    }
    if (kind != kTrailerFrame) {
      return Corrupt(at, "unexpected frame kind " + std::to_string(kind));
    }
    if (frame_.size() != kTrailerPayloadBytes) {
      return Corrupt(at, "trailer payload is " + std::to_string(frame_.size()) + " bytes, expected " +
                             std::to_string(kTrailerPayloadBytes));
    }
    const uint64_t want_records = coding::DecodeFixed64(frame_.data());
    const uint64_t want_frames = coding::DecodeFixed64(frame_.data() + 8);
    const uint32_t want_crc = coding::DecodeFixed32(frame_.data() + 16);
    if (want_records != records_) {
      return Corrupt(at, "trailer counts " + std::to_string(want_records) +
                             " records, the file holds " + std::to_string(records_));
    }
    if (want_frames != data_frames_) {
      return Corrupt(at, "trailer counts " + std::to_string(want_frames) +
                             " data chunks, the file holds " + std::to_string(data_frames_));
    }
    if (want_crc != crc_before) {
      return Corrupt(at, "whole-file checksum mismatch");
    }
    if (offset_ != file_size_) {
      return Corrupt(offset_, std::to_string(file_size_ - offset_) +
                                  " unexpected bytes after the trailer");
    }
    frame_.clear();
    pos_ = 0;
    done_ = true;
    *done = true;
    return Status::OK();
  }
  const uint64_t at = frame_offset_ + kFrameHeaderBytes + pos_;
  const uint8_t t = static_cast<uint8_t>(frame_[pos_++]);
  if (t < static_cast<uint8_t>(SnapshotRecordType::kSession) ||
      t > static_cast<uint8_t>(SnapshotRecordType::kHistory)) {
    return Corrupt(at, "unknown record type " + std::to_string(t));
  }
  uint32_t len = 0;
  if (!GetVarint32(frame_, &pos_, &len) || len > frame_.size() - pos_) {
    return Corrupt(at, "record length runs past the end of its chunk");
  }
  *type = static_cast<SnapshotRecordType>(t);
  *message = std::string_view(frame_.data() + pos_, len);
  pos_ += len;
  ++records_;
  return Status::OK();
}

Status SnapshotReader::VerifyAll() {
  SnapshotSession session;
  SnapshotSessionResult result;
  SnapshotKv kv;
  SnapshotStoreState store;
  SnapshotEvent event;
  for (;;) {
    SnapshotRecordType type;
    std::string_view msg;
    bool done = false;
    Status s = Next(&type, &msg, &done);
    if (!s.ok()) return s;
    if (done) return Status::OK();
    bool parsed = false;
    switch (type) {
      case SnapshotRecordType::kSession:
        parsed = session.ParseFromArray(msg.data(), static_cast<int>(msg.size()));
        break;
      case SnapshotRecordType::kSessionResult:
        parsed = result.ParseFromArray(msg.data(), static_cast<int>(msg.size()));
        break;
      case SnapshotRecordType::kKv:
        parsed = kv.ParseFromArray(msg.data(), static_cast<int>(msg.size()));
        break;
      case SnapshotRecordType::kStore:
        parsed = store.ParseFromArray(msg.data(), static_cast<int>(msg.size()));
        break;
      case SnapshotRecordType::kHistory:
        parsed = event.ParseFromArray(msg.data(), static_cast<int>(msg.size()));
        break;
    }
    if (!parsed) {
      return Corrupt(frame_offset_, "record " + std::to_string(records_) +
                                        " does not parse as its message type");
    }
  }
}

}  // namespace raftkv
