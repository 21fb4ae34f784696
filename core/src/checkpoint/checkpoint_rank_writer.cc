#include "checkpoint/checkpoint_rank_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>

#include "checkpoint/checkpoint_layout.h"
#include "util/posix_file.h"
#include "util/save_io_limit.h"
#include "zt/bytes.h"
#include "zt/error.h"

namespace zt {

namespace ckpt {

char* SnapshotBuffer::reserve(int64_t bytes) {
  const int64_t rounded = (bytes + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment;
  if (rounded <= bytes_) return data_.get();
  data_.reset();
  bytes_ = 0;
  // Not zeroed: the pages are first touched by the copy itself.
  void* p = nullptr;
  if (::posix_memalign(&p, static_cast<size_t>(kDirectAlignment),
                       static_cast<size_t>(std::max<int64_t>(rounded, kDirectAlignment))) != 0) {
    throw IoError("checkpoint: cannot allocate " + mib_text(static_cast<double>(rounded)) +
                  " of host memory for the asynchronous save's snapshot; free memory or set "
                  "checkpoint.async = false (the step then waits for the write)");
  }
  data_.reset(static_cast<char*>(p));
  bytes_ = rounded;
  return data_.get();
}

}  // namespace ckpt

CheckpointRankWriter::CheckpointRankWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointRankWriter::~CheckpointRankWriter() = default;

void CheckpointRankWriter::add_tensor(const CheckpointTensor& tensor) { impl_->add_tensor(tensor); }
int64_t CheckpointRankWriter::declare(const CheckpointPiece& piece, bool streamed) {
  return impl_->declare(piece, streamed);
}
void CheckpointRankWriter::begin_data() { impl_->begin_data(); }
void CheckpointRankWriter::write(int64_t index, int64_t offset, const float* data, int64_t count) {
  impl_->write(index, offset, data, count);
}
void CheckpointRankWriter::set_counters(const EngineCounters& counters) {
  impl_->set_counters(counters);
}

CheckpointRankWriter::Impl::Impl(Setup setup)
    : setup_(std::move(setup)),
      file_name_(ckpt::rank_file_name(setup_.rank, setup_.world)),
      path_((std::filesystem::path(setup_.folder) / file_name_).string()) {}

void CheckpointRankWriter::Impl::add_tensor(const CheckpointTensor& tensor) {
  if (data_started_) throw InternalError("CheckpointRankWriter::add_tensor after begin_data()");
  if (!numel_.emplace(tensor.name, tensor.numel()).second) {
    throw InternalError("CheckpointRankWriter: tensor '" + tensor.name + "' added twice");
  }
  tensors_.push_back(tensor);
}

int64_t CheckpointRankWriter::Impl::declare(const CheckpointPiece& piece, bool streamed) {
  if (data_started_) throw InternalError("CheckpointRankWriter::declare after begin_data()");
  auto it = numel_.find(piece.tensor);
  if (it == numel_.end()) {
    throw InternalError("CheckpointRankWriter: piece of unknown tensor '" + piece.tensor +
                        "' (add_tensor it first)");
  }
  if (piece.kind.empty() || piece.begin < 0 || piece.begin > piece.end || piece.end > it->second) {
    throw InternalError("CheckpointRankWriter: bad piece '" + piece.kind + "' [" +
                        std::to_string(piece.begin) + ", " + std::to_string(piece.end) +
                        ") of tensor '" + piece.tensor + "' (" + std::to_string(it->second) +
                        " elements)");
  }
  Piece p;
  p.piece = piece;
  p.streamed = streamed;
  p.buffered = setup_.snapshot != nullptr && !streamed;
  pieces_.push_back(std::move(p));
  return static_cast<int64_t>(pieces_.size()) - 1;
}

void CheckpointRankWriter::Impl::add_entry(Piece& p) {
  const CheckpointPiece& c = p.piece;
  const std::string name = c.kind + "/" + c.tensor + "/" + std::to_string(c.begin) + "-" +
                           std::to_string(c.end);
  p.entry = file_.add(name, "F32", {c.end - c.begin});
}

void CheckpointRankWriter::Impl::begin_data() {
  if (data_started_) throw InternalError("CheckpointRankWriter::begin_data called twice");
  // Buffered pieces first: the snapshot then is the start of the data section, one write.
  for (Piece& p : pieces_) {
    if (!p.buffered) continue;
    add_entry(p);
    p.buffer_offset = buffer_bytes_;
    buffer_bytes_ += (p.piece.end - p.piece.begin) * static_cast<int64_t>(sizeof(float));
  }
  for (Piece& p : pieces_) {
    if (!p.buffered) add_entry(p);
  }
  file_.set_metadata("format", "zt-checkpoint-rank");
  file_.set_metadata("step", std::to_string(setup_.step));
  file_.set_metadata("rank", std::to_string(setup_.rank));
  file_.set_metadata("world", std::to_string(setup_.world));
  file_.open(path_);
  data_started_ = true;
  check_free_space();
  if (setup_.snapshot) buffer_ = setup_.snapshot->reserve(buffer_bytes_);
  // The pieces written as they come follow the snapshot, in declaration order.
  sequential_ = std::make_unique<ckpt::SequentialDirectWriter>(
      path_, file_.header_bytes() + buffer_bytes_,
      [this](int64_t file_offset, const char* data, int64_t bytes) {
    file_.write_data(file_offset - file_.header_bytes(), data, bytes);
      });
}

void CheckpointRankWriter::Impl::check_free_space() const {
  int64_t free = -1;
  {
    const ckpt::SaveIoDeadline deadline("looking at the free space under " + setup_.folder);
    free = ckpt::free_bytes(setup_.folder);
  }
  // The header is on disk already; the data section still needs room.
  if (free < 0 || free >= file_.file_bytes() - file_.header_bytes()) return;
  const int64_t need = file_.file_bytes();
  throw IoError(path_ + ": checkpoint of step " + std::to_string(setup_.step) + " needs " +
                std::to_string(need) + " bytes (" + mib_text(static_cast<double>(need)) + "), " +
                std::to_string(free) +
                " bytes free; free space (older step folders), or point checkpoint.dir "
                "elsewhere; checkpoint.keep_last (0 keeps all) bounds how many stay, and a save "
                "needs room for one more before the oldest goes");
}

CheckpointRankWriter::Impl::Piece& CheckpointRankWriter::Impl::piece_at(int64_t index,
                                                                        const char* call) {
  if (!data_started_) {
    throw InternalError(std::string("CheckpointRankWriter::") + call + " before begin_data()");
  }
  if (index < 0 || index >= static_cast<int64_t>(pieces_.size())) {
    throw InternalError(std::string("CheckpointRankWriter::") + call + ": no piece #" +
                        std::to_string(index));
  }
  return pieces_[static_cast<size_t>(index)];
}

void CheckpointRankWriter::Impl::write(int64_t index, int64_t offset, const float* data,
                                       int64_t count) {
  Piece& p = piece_at(index, "write");
  const int64_t size = p.piece.end - p.piece.begin;
  if (offset != p.written || count < 0 || count > size - offset) {
    throw InternalError("CheckpointRankWriter::write: elements [" + std::to_string(offset) + ", " +
                        std::to_string(offset + count) + ") of piece '" + p.piece.kind + "' of " +
                        p.piece.tensor + " (" + std::to_string(size) +
                        " elements) do not continue at " + std::to_string(p.written));
  }
  const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  const int64_t at = offset * static_cast<int64_t>(sizeof(float));
  if (p.buffered) {
    if (bytes > 0) std::memcpy(buffer_ + p.buffer_offset + at, data, static_cast<size_t>(bytes));
  } else {
    const int64_t file_offset = file_.header_bytes() +
                                file_.entries()[static_cast<size_t>(p.entry)].begin + at;
    if (sequential_ && file_offset == sequential_->position()) {
      sequential_->append(data, bytes);
    } else {
      // Out of file order (not what the engine does): write in place, through the page cache.
      if (sequential_) sequential_->flush();
      sequential_.reset();
      file_.write(p.entry, at, data, bytes);
    }
    p.crc32 = ckpt::crc32_update(p.crc32, data, bytes);
  }
  p.written += count;
}

// The snapshot is the start of the data section, which starts aligned (the header is padded to
// kDirectAlignment): its whole blocks go with direct I/O, the rest through the page cache.
void CheckpointRankWriter::Impl::write_snapshot() {
  const int64_t direct = buffer_bytes_ / ckpt::kDirectAlignment * ckpt::kDirectAlignment;
  int64_t done = 0;
  if (direct > 0 && file_.header_bytes() % ckpt::kDirectAlignment == 0) {
    const int err = ckpt::pwrite_direct(path_, buffer_, direct, file_.header_bytes());
    if (err == 0) {
      done = direct;
    } else if (err != EINVAL) {
      throw IoError("cannot write " + std::to_string(direct) + " bytes of the snapshot to " +
                    path_ + ": " + ckpt::errno_text(err) +
                    ckpt::write_way_out(err, "point checkpoint.dir elsewhere"));
    }
  }
  if (buffer_bytes_ > done) file_.write_data(done, buffer_ + done, buffer_bytes_ - done);
}

void CheckpointRankWriter::Impl::set_counters(const EngineCounters& counters) {
  counters_ = counters;
  counters_set_ = true;
}

void CheckpointRankWriter::Impl::check_complete() const {
  if (!data_started_) throw InternalError("CheckpointRankWriter: begin_data() was never called");
  if (!counters_set_) throw InternalError("CheckpointRankWriter: set_counters() was never called");
  for (const Piece& p : pieces_) {
    if (p.written != p.piece.end - p.piece.begin) {
      throw InternalError("CheckpointRankWriter: piece '" + p.piece.kind + "' [" +
                          std::to_string(p.piece.begin) + ", " + std::to_string(p.piece.end) +
                          ") of " + p.piece.tensor + " got " + std::to_string(p.written) +
                          " elements, not all");
    }
  }
}

ckpt::RankReport CheckpointRankWriter::Impl::finish_file() {
  for (Piece& p : pieces_) {
    if (p.buffered) {
      p.crc32 = ckpt::crc32_update(0, buffer_ + p.buffer_offset,
                                   (p.piece.end - p.piece.begin) * int64_t{sizeof(float)});
    }
  }
  write_snapshot();
  if (sequential_) sequential_->flush();
  sequential_.reset();
  file_.close(/*sync=*/true);
  {
    const ckpt::SaveIoDeadline deadline("fsyncing the folder " + setup_.folder);
    ckpt::fsync_dir(setup_.folder);
  }
  ckpt::RankReport r;
  r.rank = setup_.rank;
  r.file = {file_name_, file_.file_bytes(), file_.header_bytes(),
            ckpt::crc32_update(0, file_.header().data(), file_.header_bytes())};
  for (const Piece& p : pieces_) {
    const int64_t offset = file_.header_bytes() +
                           file_.entries()[static_cast<size_t>(p.entry)].begin;
    r.pieces.push_back({p.piece, file_name_, offset, p.crc32});
  }
  // Every rank lists the same tensors; rank 0's list goes into the manifest.
  if (setup_.rank == 0) r.tensors = tensors_;
  r.counters = counters_;
  return r;
}

}  // namespace zt
