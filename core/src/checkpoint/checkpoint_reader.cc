// CheckpointReader: the manifest checked once at open, rank files opened lazily (one fd each)
// and read with pread, so read() is const and runs on several threads at once.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "checkpoint/checkpoint_layout.h"
#include "checkpoint/checkpoint_manifest.h"
#include "util/fault_injection.h"
#include "util/posix_file.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"
#include "zt/host/did_you_mean.h"
#include "zt/host/file_io_deadline.h"

namespace fs = std::filesystem;

namespace zt {

namespace {

// Parts of a piece outside the requested range go through a buffer this large, so reading a
// slice of a huge piece (to check its crc32) does not allocate the whole piece.
constexpr int64_t kScratchBytes = int64_t{8} << 20;
// One read system call takes this many bytes at most, so that the deadline on each bounds a
// storage that stopped answering, not the size of a piece.
constexpr int64_t kReadChunkBytes = int64_t{16} << 20;

// The calls each hook counts, in this process.
std::atomic<int64_t> rank_file_calls{0};
std::atomic<int64_t> manifest_reads{0};

// A file of the checkpoint whose lookup `ec` failed for another reason than its absence (a folder
// without search permission, a loop of links, an I/O error): said as that, not as a missing file.
void throw_if_unreachable(const fs::path& path, const std::error_code& ec) {
  if (!ec || ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) return;
  if (ec == std::errc::is_a_directory || ec == std::errc::not_supported) {
    throw IoError(path.string() + " is not a plain file (" + ec.message() +
                  "): the checkpoint is damaged; resume from an older one");
  }
  throw IoError("cannot look at " + path.string() + ": " + ec.message() +
                "; check its permissions, the folders above it and the storage, or resume from "
                "another copy");
}

std::string range_text(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// The kinds for a message, the gradient codec's residuals (codec_residual.rank<r>,
// codec_residual_across.rank<r>: one a saving rank and hop) counted instead of listed.
std::string kinds_for_message(const std::vector<std::string>& kinds) {
  std::string text;
  std::set<std::string> residual_ranks;
  for (const std::string& k : kinds) {
    if (k.rfind("codec_residual", 0) == 0) {
      residual_ranks.insert(k.substr(k.rfind('.') + 1));
      continue;
    }
    text += (text.empty() ? "" : ", ") + k;
  }
  if (!residual_ranks.empty()) {
    text += (text.empty() ? "" : ", ") + std::string("codec residuals of ") +
            std::to_string(residual_ranks.size()) + " rank(s)";
  }
  return text;
}

}  // namespace

class CheckpointReader::Impl {
 public:
  Impl(const std::string& folder, std::chrono::milliseconds io_limit);
  void read(const std::string& tensor, const std::string& kind, int64_t begin, int64_t end,
            float* out) const;
  std::vector<std::pair<int64_t, int64_t>> saved_ranges(const std::string& tensor,
                                                        const std::string& kind, int64_t begin,
                                                        int64_t end) const;

  std::string folder_;
  std::chrono::milliseconds io_limit_;
  ckpt::Manifest manifest_;
  std::unordered_map<std::string, size_t> tensor_index_;
  std::vector<std::string> kinds_;

 private:
  struct RankFile {
    std::string path;
    std::once_flag opened;
    int fd = -1;
    ~RankFile() {
      if (fd >= 0) ::close(fd);
    }
  };
  std::string read_manifest_text() const;
  bool fits(const ckpt::PieceRecord& p) const;
  void index_pieces();
  void check_files();
  int open_file(size_t index) const;
  // `bytes` at `offset` of rank file `file` (open as `fd`) into `out`, a bounded read system call
  // at a time; a short read throws IoError naming the piece `p` it belongs to.
  void read_bytes(size_t file, int fd, char* out, int64_t bytes, int64_t offset,
                  const ckpt::PieceRecord& p) const;
  void read_piece(const ckpt::PieceRecord& p, int64_t lo, int64_t hi, float* at_lo) const;

  void read_range(const ckpt::PieceRecord& p, int64_t lo, int64_t hi, float* at_lo) const;

  std::map<std::pair<std::string, std::string>, std::vector<const ckpt::PieceRecord*>> pieces_;
  // Pieces whose crc32 this reader has checked: later reads take only the range they need, so
  // a loader going tile by tile through a large piece reads it whole once, not once per tile.
  mutable std::mutex verified_mu_;
  mutable std::unordered_set<const ckpt::PieceRecord*> verified_;
  std::unordered_map<std::string, size_t> file_index_;
  std::vector<std::unique_ptr<RankFile>> files_;
};

CheckpointReader::Impl::Impl(const std::string& folder, std::chrono::milliseconds io_limit)
    : folder_(folder), io_limit_(io_limit) {
  const std::string text = read_manifest_text();
  manifest_ = ckpt::manifest_from_json(text, (fs::path(folder_) / ckpt::kManifestName).string());
  index_pieces();
  check_files();
}

std::string CheckpointReader::Impl::read_manifest_text() const {
  const fs::path manifest = fs::path(folder_) / ckpt::kManifestName;
  const fs::path crc_file = fs::path(folder_) / ckpt::kManifestCrcName;
  const FileIoDeadline deadline("reading " + manifest.string(), io_limit_, kCheckpointIoWayOut);
  stall_if_injected("stall_checkpoint_manifest", manifest_reads, io_limit_);
  std::error_code ec;
  const bool has_manifest = fs::is_regular_file(manifest, ec);
  throw_if_unreachable(manifest, ec);
  if (!has_manifest) {
    throw ConfigError("not a checkpoint: " + folder_ +
                      " has no manifest.json; give a step-N folder that zt's [checkpoint] wrote, "
                      "or checkpoint.dir itself to load its latest");
  }
  const bool has_crc = fs::is_regular_file(crc_file, ec);
  throw_if_unreachable(crc_file, ec);
  if (!has_crc) {
    throw IoError(crc_file.string() + " is missing: the checkpoint was never published " +
                  "completely; " + ckpt::older_checkpoint_hint(folder_));
  }
  const std::string text = ckpt::read_whole_file(manifest.string());
  std::string want = ckpt::read_whole_file(crc_file.string());
  while (!want.empty() && (want.back() == '\n' || want.back() == ' ')) want.pop_back();
  const std::string got = ckpt::crc32_hex(
      ckpt::crc32_update(0, text.data(), static_cast<int64_t>(text.size())));
  if (got != want) {
    throw IoError("checksum mismatch in " + manifest.string() + ": crc32 " + got + ", " +
                  crc_file.filename().string() + " says " + want + "; the file is damaged; " +
                  ckpt::older_checkpoint_hint(folder_));
  }
  return text;
}

// The piece names a known tensor and file, lies inside the tensor and inside the file's data.
bool CheckpointReader::Impl::fits(const ckpt::PieceRecord& p) const {
  auto t = tensor_index_.find(p.piece.tensor);
  auto f = file_index_.find(p.file);
  if (t == tensor_index_.end() || f == file_index_.end()) return false;
  const auto& file = manifest_.files[f->second];
  // Every number is the manifest's, so untrusted: compared before any arithmetic can overflow.
  if (p.piece.begin < 0 || p.piece.begin > p.piece.end ||
      p.piece.end > manifest_.tensors[t->second].numel()) {
    return false;
  }
  const int64_t elements = p.piece.end - p.piece.begin;
  if (elements > file.bytes / static_cast<int64_t>(sizeof(float))) return false;
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(float));
  return p.offset >= file.header_bytes && p.offset <= file.bytes - bytes;
}

void CheckpointReader::Impl::index_pieces() {
  const std::string where = (fs::path(folder_) / ckpt::kManifestName).string();
  for (size_t i = 0; i < manifest_.tensors.size(); ++i) {
    if (!tensor_index_.emplace(manifest_.tensors[i].name, i).second) {
      throw ConfigError(
          where + ": tensor '" + manifest_.tensors[i].name +
          "' is listed twice; the manifest is damaged: " + ckpt::older_checkpoint_hint(folder_));
    }
  }
  for (size_t i = 0; i < manifest_.files.size(); ++i) file_index_[manifest_.files[i].name] = i;
  for (const auto& p : manifest_.pieces) {
    if (!fits(p)) {
      throw ConfigError(where + ": piece '" + p.piece.kind + "' " +
                        range_text(p.piece.begin, p.piece.end) + " of tensor '" + p.piece.tensor +
                        "' in " + p.file +
                        " does not match the manifest's tensors and files; resume from an older "
                        "checkpoint");
    }
    pieces_[{p.piece.tensor, p.piece.kind}].push_back(&p);
    if (std::find(kinds_.begin(), kinds_.end(), p.piece.kind) == kinds_.end()) {
      kinds_.push_back(p.piece.kind);
    }
  }
  for (auto& [key, list] : pieces_) {
    std::sort(list.begin(), list.end(),
              [](const auto* a, const auto* b) { return a->piece.begin < b->piece.begin; });
    // Each element is saved once: overlapping pieces would make which value loads depend on
    // the order a sort left them in. (An empty piece, a rank's share of nothing, holds none.)
    const ckpt::PieceRecord* last = nullptr;
    for (const ckpt::PieceRecord* p : list) {
      if (p->piece.begin == p->piece.end) continue;
      if (last && p->piece.begin < last->piece.end) {
        throw ConfigError(
            where + ": pieces " + range_text(last->piece.begin, last->piece.end) + " and " +
            range_text(p->piece.begin, p->piece.end) + " of '" + key.second + "' of tensor '" +
            key.first +
            "' overlap; the manifest is damaged: " + ckpt::older_checkpoint_hint(folder_));
      }
      last = p;
    }
  }
  std::sort(kinds_.begin(), kinds_.end(), [](const std::string& a, const std::string& b) {
    return (a == "param") != (b == "param") ? a == "param" : a < b;
  });
}

void CheckpointReader::Impl::check_files() {
  const int world = static_cast<int>(manifest_.files.size());
  for (int r = 0; r < world; ++r) {
    const auto& f = manifest_.files[static_cast<size_t>(r)];
    const fs::path path = fs::path(folder_) / f.name;
    const FileIoDeadline deadline("looking up " + path.string(), io_limit_, kCheckpointIoWayOut);
    std::error_code ec;
    // The manifest names plain files (manifest_from_json); a symbolic link among them must not
    // lead out of the folder either.
    if (fs::is_symlink(fs::symlink_status(path, ec))) {
      const fs::path target = fs::weakly_canonical(path, ec);
      const fs::path home = fs::weakly_canonical(folder_, ec);
      if (ec || target.parent_path() != home) {
        throw ConfigError(path.string() + " is a symbolic link to " + target.string() +
                          ", outside the checkpoint folder; a checkpoint's files live in its "
                          "folder: copy the file there or resume from one zt wrote");
      }
    }
    const auto size = fs::file_size(path, ec);
    throw_if_unreachable(path, ec);
    if (ec) {
      throw IoError("missing rank file " + path.string() + " (rank " + std::to_string(r) + " of " +
                    std::to_string(world) +
                    "); the checkpoint is incomplete: " + ckpt::older_checkpoint_hint(folder_));
    }
    if (static_cast<int64_t>(size) != f.bytes) {
      throw IoError(path.string() + " is " + std::to_string(size) + " bytes, the manifest says " +
                    std::to_string(f.bytes) + ": the file is damaged or truncated; " +
                    ckpt::older_checkpoint_hint(folder_));
    }
    files_.push_back(std::make_unique<RankFile>());
    files_.back()->path = path.string();
  }
}

int CheckpointReader::Impl::open_file(size_t index) const {
  RankFile& f = *files_[index];
  // A failed attempt throws out of call_once, which then lets the next read try again.
  std::call_once(f.opened, [&] {
    const auto& record = manifest_.files[index];
    const FileIoDeadline deadline("opening " + f.path, io_limit_, kCheckpointIoWayOut);
    stall_if_injected("stall_checkpoint_read", rank_file_calls, io_limit_);
    int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw IoError("cannot open " + f.path + ": " + ckpt::errno_text(errno));
    std::string header(static_cast<size_t>(record.header_bytes), '\0');
    const int64_t got = ckpt::pread_full(fd, header.data(), record.header_bytes, 0);
    const uint32_t crc = ckpt::crc32_update(0, header.data(), std::max<int64_t>(got, 0));
    if (got != record.header_bytes || crc != record.header_crc32) {
      ::close(fd);
      throw IoError("checksum mismatch in " + f.path + ": its safetensors header (" +
                    std::to_string(record.header_bytes) +
                    " bytes) differs from the one saved; the file is damaged; " +
                    ckpt::older_checkpoint_hint(folder_));
    }
    f.fd = fd;
  });
  return f.fd;
}

void CheckpointReader::Impl::read_bytes(size_t file, int fd, char* out, int64_t bytes,
                                        int64_t offset, const ckpt::PieceRecord& p) const {
  for (int64_t done = 0; done < bytes;) {
    const int64_t chunk = std::min(kReadChunkBytes, bytes - done);
    int64_t got = 0;
    int err = 0;
    {
      const FileIoDeadline deadline("reading " + std::to_string(chunk) + " bytes at offset " +
                                        std::to_string(offset + done) + " of " + files_[file]->path,
                                    io_limit_, kCheckpointIoWayOut);
      stall_if_injected("stall_checkpoint_read", rank_file_calls, io_limit_);
      got = ckpt::pread_full(fd, out + done, chunk, offset + done);
      err = errno;  // before the deadline's end frees memory
    }
    if (got != chunk) {
      throw IoError("cannot read " + std::to_string(bytes) + " bytes at offset " +
                    std::to_string(offset) + " of " + files_[file]->path + " (" + p.piece.kind +
                    " of tensor " + p.piece.tensor +
                    "): " + (got < 0 ? ckpt::errno_text(err) : std::string("the file ends early")));
    }
    done += chunk;
  }
}

// Elements [lo, hi) of a piece already checked, and nothing else.
void CheckpointReader::Impl::read_range(const ckpt::PieceRecord& p, int64_t lo, int64_t hi,
                                        float* at_lo) const {
  const size_t file = file_index_.at(p.file);
  const int64_t bytes = (hi - lo) * static_cast<int64_t>(sizeof(float));
  const int64_t offset = p.offset + (lo - p.piece.begin) * static_cast<int64_t>(sizeof(float));
  read_bytes(file, open_file(file), reinterpret_cast<char*>(at_lo), bytes, offset, p);
}

// Reads piece `p` whole (to check its crc32) the first time, its elements [lo, hi) into `at_lo`.
void CheckpointReader::Impl::read_piece(const ckpt::PieceRecord& p, int64_t lo, int64_t hi,
                                        float* at_lo) const {
  bool checked = false;
  {
    std::lock_guard<std::mutex> lock(verified_mu_);
    checked = verified_.count(&p) > 0;
  }
  if (checked) {
    read_range(p, lo, hi, at_lo);
    return;
  }
  const size_t file = file_index_.at(p.file);
  const int fd = open_file(file);
  std::vector<char> scratch;
  uint32_t crc = 0;
  for (int64_t e = p.piece.begin; e < p.piece.end;) {
    const bool wanted = e >= lo && e < hi;
    int64_t stop = wanted ? hi : (e < lo ? lo : p.piece.end);
    char* dst = nullptr;
    if (wanted) {
      dst = reinterpret_cast<char*>(at_lo + (e - lo));
    } else {
      stop = std::min(stop, e + kScratchBytes / static_cast<int64_t>(sizeof(float)));
      scratch.resize(static_cast<size_t>(stop - e) * sizeof(float));
      dst = scratch.data();
    }
    const int64_t bytes = (stop - e) * static_cast<int64_t>(sizeof(float));
    const int64_t offset = p.offset + (e - p.piece.begin) * static_cast<int64_t>(sizeof(float));
    read_bytes(file, fd, dst, bytes, offset, p);
    crc = ckpt::crc32_update(crc, dst, bytes);
    e = stop;
  }
  if (crc != p.crc32) {
    throw IoError("checksum mismatch in " + files_[file]->path + ": " + p.piece.kind +
                  " of tensor " + p.piece.tensor + " elements " +
                  range_text(p.piece.begin, p.piece.end) + " (crc32 " + ckpt::crc32_hex(crc) +
                  ", saved " + ckpt::crc32_hex(p.crc32) + "); the file is damaged; " +
                  ckpt::older_checkpoint_hint(folder_));
  }
  std::lock_guard<std::mutex> lock(verified_mu_);
  verified_.insert(&p);
}

void CheckpointReader::Impl::read(const std::string& tensor, const std::string& kind, int64_t begin,
                                  int64_t end, float* out) const {
  auto t = tensor_index_.find(tensor);
  if (t == tensor_index_.end()) {
    std::vector<std::string> names;
    for (const auto& x : manifest_.tensors) names.push_back(x.name);
    throw ConfigError("checkpoint " + folder_ + " has no tensor '" + tensor + "'" +
                      did_you_mean(tensor, names) + "; it was saved from another model");
  }
  const int64_t numel = manifest_.tensors[t->second].numel();
  const std::string what = kind + " of tensor " + tensor;
  if (begin < 0 || begin > end || end > numel) {
    throw ConfigError("elements " + range_text(begin, end) + " of " + what + " are outside it (" +
                      std::to_string(numel) + " elements in checkpoint " + folder_ + ")");
  }
  if (std::find(kinds_.begin(), kinds_.end(), kind) == kinds_.end()) {
    throw ConfigError("checkpoint " + folder_ + " has no '" + kind + "' state (it holds: " +
                      kinds_for_message(kinds_) + "); it was saved with another optimizer");
  }
  static const std::vector<const ckpt::PieceRecord*> kNone;
  auto list = pieces_.find({tensor, kind});
  int64_t cursor = begin;
  for (const ckpt::PieceRecord* p : list == pieces_.end() ? kNone : list->second) {
    if (cursor >= end) break;
    if (p->piece.end <= cursor || p->piece.begin == p->piece.end) continue;
    if (p->piece.begin > cursor) break;
    const int64_t stop = std::min(end, p->piece.end);
    read_piece(*p, cursor, stop, out + (cursor - begin));
    cursor = stop;
  }
  if (cursor < end) {
    throw ConfigError("checkpoint " + folder_ + " does not hold elements " +
                      range_text(cursor, end) + " of " + what +
                      " (no saved piece covers them); resume from another checkpoint");
  }
}

std::vector<std::pair<int64_t, int64_t>> CheckpointReader::Impl::saved_ranges(
    const std::string& tensor, const std::string& kind, int64_t begin, int64_t end) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto list = pieces_.find({tensor, kind});
  if (list == pieces_.end()) return out;
  for (const ckpt::PieceRecord* p : list->second) {  // sorted by their start
    const int64_t lo = std::max(begin, p->piece.begin), hi = std::min(end, p->piece.end);
    if (lo >= hi) continue;
    if (!out.empty() && out.back().second >= lo) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

CheckpointReader::CheckpointReader(const std::string& folder, std::chrono::milliseconds io_limit)
    : impl_(std::make_unique<Impl>(folder, io_limit)) {}
CheckpointReader::~CheckpointReader() = default;

const std::string& CheckpointReader::folder() const { return impl_->folder_; }
int64_t CheckpointReader::step() const { return impl_->manifest_.step; }
const std::vector<CheckpointTensor>& CheckpointReader::tensors() const {
  return impl_->manifest_.tensors;
}
const CheckpointTensor* CheckpointReader::find_tensor(const std::string& name) const {
  auto it = impl_->tensor_index_.find(name);
  return it == impl_->tensor_index_.end() ? nullptr : &impl_->manifest_.tensors[it->second];
}
std::vector<std::string> CheckpointReader::kinds() const { return impl_->kinds_; }
std::string CheckpointReader::kinds_text() const { return kinds_for_message(impl_->kinds_); }
EngineCounters CheckpointReader::counters() const { return impl_->manifest_.counters; }
const CheckpointMeta& CheckpointReader::meta() const { return impl_->manifest_.meta; }
std::string CheckpointReader::zt_version() const { return impl_->manifest_.zt_version; }

void CheckpointReader::read(const std::string& tensor, const std::string& kind, int64_t begin,
                            int64_t end, float* out) const {
  impl_->read(tensor, kind, begin, end, out);
}

std::vector<std::pair<int64_t, int64_t>> CheckpointReader::saved_ranges(const std::string& tensor,
                                                                        const std::string& kind,
                                                                        int64_t begin,
                                                                        int64_t end) const {
  return impl_->saved_ranges(tensor, kind, begin, end);
}

}  // namespace zt
