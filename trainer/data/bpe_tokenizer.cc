// The merge loop follows tiktoken's: a list of part boundaries with the rank of each part merged
// with its right neighbour, the lowest merged and its two neighbours' ranks looked up again. A
// piece that is a token as a whole (most words) skips the loop.
#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <queue>

#include "zt/error.h"
#include "zt/host/utf8.h"

namespace zt::data {

namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();

uint64_t hash_bytes(const char* p, size_t n) {
  // Eight bytes at a time through a 64-bit multiply; enough spread for an open-addressed table.
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0xff51afd7ed558ccdULL);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 32);
}

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

}  // namespace

// Bytes -> rank, open addressing over the encoding's own token strings (no copies).
class BpeTokenizer::RankTable {
 public:
  explicit RankTable(const std::vector<std::string>& tokens) : tokens_(tokens) {
    size_t slots = 16;
    while (slots < tokens.size() * 2) slots *= 2;
    slots_.assign(slots, kNoRank);
    mask_ = slots - 1;
    for (uint32_t rank = 0; rank < tokens.size(); ++rank) {
      const std::string& t = tokens[rank];
      if (t.empty()) continue;
      size_t at = hash_bytes(t.data(), t.size()) & mask_;
      while (slots_[at] != kNoRank) {
        if (tokens_[slots_[at]] == t) {
          duplicate_ = rank;
          break;
        }
        at = (at + 1) & mask_;
      }
      if (slots_[at] == kNoRank) slots_[at] = rank;
    }
  }

  uint32_t find(const char* p, size_t n) const {
    size_t at = hash_bytes(p, n) & mask_;
    for (;;) {
      const uint32_t rank = slots_[at];
      if (rank == kNoRank) return kNoRank;
      const std::string& t = tokens_[rank];
      if (t.size() == n && std::memcmp(t.data(), p, n) == 0) return rank;
      at = (at + 1) & mask_;
    }
  }

  // A rank whose bytes an earlier rank already has, or kNoRank.
  uint32_t duplicate() const { return duplicate_; }

 private:
  const std::vector<std::string>& tokens_;
  std::vector<uint32_t> slots_;
  size_t mask_ = 0;
  uint32_t duplicate_ = kNoRank;
};

BpeTokenizer::BpeTokenizer(BpeEncoding encoding) : encoding_(std::move(encoding)) {
  const std::string& src = encoding_.source;
  ranks_ = std::make_unique<RankTable>(encoding_.tokens);
  if (ranks_->duplicate() != kNoRank) {
    throw ConfigError("encoding '" + encoding_.name + "' from " + src + ": rank " +
                      std::to_string(ranks_->duplicate()) +
                      " repeats the bytes of an earlier token; the file is damaged, reinstall it "
                      "(scripts/setup.sh all)");
  }
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    if (ranks_->find(&byte, 1) == kNoRank) {
      throw ConfigError("encoding '" + encoding_.name + "' from " + src +
                        " has no token for byte " + std::to_string(b) +
                        ", so some text could not be encoded; a byte-level BPE file is needed");
    }
  }
  vocab_size_ = static_cast<uint32_t>(encoding_.tokens.size());
  for (const auto& [text, id] : encoding_.special) {
    // Specials follow the ranks (tiktoken's leave small gaps); an id far past them is a damaged
    // file, and would size the id table after it.
    if (text.empty() || id > encoding_.tokens.size() + (1u << 20)) {
      throw ConfigError(
          "encoding '" + encoding_.name + "' from " + src + ": special token '" + text +
          "' with id " + std::to_string(id) + " is " +
          (text.empty() ? "empty"
                        : "far past its " + std::to_string(encoding_.tokens.size()) + " ranks") +
          "; the file is damaged, reinstall it (scripts/setup.sh all)");
    }
    if (id < encoding_.tokens.size() && !encoding_.tokens[id].empty()) {
      throw ConfigError("encoding '" + encoding_.name + "' from " + src + ": special token " +
                        text + " has id " + std::to_string(id) +
                        ", which is also an ordinary token");
    }
    vocab_size_ = std::max(vocab_size_, id + 1);
  }
  by_id_.assign(vocab_size_, nullptr);
  for (uint32_t rank = 0; rank < encoding_.tokens.size(); ++rank) {
    if (!encoding_.tokens[rank].empty()) by_id_[rank] = &encoding_.tokens[rank];
  }
  for (const auto& [text, id] : encoding_.special) by_id_[id] = &text;

  uint64_t h = fnv1a(0xcbf29ce484222325ULL, encoding_.pattern.data(), encoding_.pattern.size());
  for (const std::string& t : encoding_.tokens) {
    const uint64_t n = t.size();
    h = fnv1a(fnv1a(h, &n, sizeof(n)), t.data(), t.size());
  }
  for (const auto& [text, id] : encoding_.special) {
    const uint64_t n = text.size();
    h = fnv1a(fnv1a(fnv1a(h, &n, sizeof(n)), text.data(), text.size()), &id, sizeof(id));
  }
  fingerprint_ = h;
  split_ = std::make_unique<Pretokenizer>(encoding_.pattern,
                                          "encoding '" + encoding_.name + "' from " + src);
}

BpeTokenizer::~BpeTokenizer() = default;

int64_t BpeTokenizer::special_id(std::string_view text) const {
  const auto it = encoding_.special.find(std::string(text));
  return it == encoding_.special.end() ? -1 : static_cast<int64_t>(it->second);
}

const std::string* BpeTokenizer::token_bytes(uint32_t id) const {
  return id < by_id_.size() ? by_id_[id] : nullptr;
}

void BpeTokenizer::merge_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  const uint32_t whole = ranks_->find(piece.data(), piece.size());
  if (whole != kNoRank) {
    out.push_back(whole);
    return;
  }
  if (piece.size() > kLongPiece) {
    merge_long_piece(piece, out);
    return;
  }
  struct Part {
    uint32_t start;
    uint32_t rank;  // rank of this part merged with the next one
  };
  thread_local std::vector<Part> parts;
  const auto n = static_cast<uint32_t>(piece.size());
  parts.resize(n + 1);
  for (uint32_t i = 0; i <= n; ++i) parts[i] = {i, kNoRank};
  const auto rank_of = [&](size_t i) {
    // The rank of parts[i] merged with parts[i + 1]: bytes [start_i, start_{i+2}).
    if (i + 2 >= parts.size()) return kNoRank;
    return ranks_->find(piece.data() + parts[i].start, parts[i + 2].start - parts[i].start);
  };
  for (size_t i = 0; i + 2 < parts.size(); ++i) parts[i].rank = rank_of(i);
  while (parts.size() > 2) {
    size_t best = 0;
    uint32_t best_rank = kNoRank;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i].rank < best_rank) {
        best_rank = parts[i].rank;
        best = i;
      }
    }
    if (best_rank == kNoRank) break;
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    parts[best].rank = rank_of(best);
    if (best > 0) parts[best - 1].rank = rank_of(best - 1);
  }
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    out.push_back(ranks_->find(piece.data() + parts[i].start, parts[i + 1].start - parts[i].start));
  }
}

// The same merges in O(n log n): the parts a linked list, the candidate merges a heap ordered by
// rank, then by position (the leftmost of equal ranks, as the scan above picks). The scan erases
// and rescans per merge, O(n^2): a run the patterns leave whole (a megabyte of '=' or of spaces in
// one document) took hours.
void BpeTokenizer::merge_long_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  const auto n = static_cast<uint32_t>(piece.size());
  constexpr uint32_t kEnd = std::numeric_limits<uint32_t>::max();
  struct Part {
    uint32_t next;  // the next part's start, n for the last
    uint32_t prev;  // the previous part's start, kEnd for the first
    uint32_t rank;  // of this part merged with the next; kNoRank when none (or merged away)
  };
  // Indexed by start byte; a part merged into its left neighbour is never read again.
  std::vector<Part> parts(n);
  for (uint32_t i = 0; i < n; ++i) parts[i] = {i + 1, i == 0 ? kEnd : i - 1, kNoRank};
  const auto rank_at = [&](uint32_t i) {
    const uint32_t j = parts[i].next;
    if (j >= n) return kNoRank;
    return ranks_->find(piece.data() + i, parts[j].next - i);
  };
  using Candidate = std::pair<uint32_t, uint32_t>;  // (rank, start)
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  for (uint32_t i = 0; i + 1 < n; ++i) {
    parts[i].rank = rank_at(i);
    if (parts[i].rank != kNoRank) heap.push({parts[i].rank, i});
  }
  while (!heap.empty()) {
    const auto [rank, i] = heap.top();
    heap.pop();
    if (parts[i].rank != rank) continue;  // stale: its neighbours changed since
    const uint32_t j = parts[i].next;     // merged into i
    parts[j].rank = kNoRank;
    parts[i].next = parts[j].next;
    if (parts[i].next < n) parts[parts[i].next].prev = i;
    parts[i].rank = rank_at(i);
    if (parts[i].rank != kNoRank) heap.push({parts[i].rank, i});
    if (const uint32_t p = parts[i].prev; p != kEnd) {
      parts[p].rank = rank_at(p);
      if (parts[p].rank != kNoRank) heap.push({parts[p].rank, p});
    }
  }
  for (uint32_t i = 0; i < n; i = parts[i].next)
    out.push_back(ranks_->find(piece.data() + i, parts[i].next - i));
}

void BpeTokenizer::encode_valid(std::string_view text, std::vector<uint32_t>& out) const {
  // Pieces hold 32-bit offsets; cutting longer text could cut a piece, so it is refused.
  if (text.size() >= (size_t{1} << 32)) {
    throw ConfigError("a text of " + std::to_string(text.size()) +
                      " bytes is too long to encode as one document; split it (4 GiB at most)");
  }
  thread_local std::vector<Piece> pieces;
  pieces.clear();
  split_->split(text, pieces);
  for (const Piece& p : pieces) merge_piece(text.substr(p.begin, p.length), out);
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<uint32_t>& out) const {
  if (is_valid_utf8(text)) {
    encode_valid(text, out);
  } else {
    encode_valid(replace_invalid_utf8(text), out);
  }
}

std::vector<uint32_t> BpeTokenizer::encode_ordinary(std::string_view text) const {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3);
  encode_ordinary(text, out);
  return out;
}

std::vector<uint32_t> BpeTokenizer::encode(std::string_view raw,
                                           const SpecialTokens& specials) const {
  std::string replaced;
  std::string_view text = raw;
  if (!is_valid_utf8(raw)) {
    replaced = replace_invalid_utf8(raw);
    text = replaced;
  }
  std::vector<const std::pair<const std::string, uint32_t>*> allowed;
  for (const auto& entry : encoding_.special) {
    const bool is_allowed = specials.allow_all ||
                            std::find(specials.allowed.begin(), specials.allowed.end(),
                                      entry.first) != specials.allowed.end();
    if (is_allowed) {
      allowed.push_back(&entry);
    } else if (specials.refuse_others) {
      const size_t at = text.find(entry.first);
      if (at != std::string_view::npos) {
        throw ConfigError("the text contains the special token " + entry.first + " (at byte " +
                          std::to_string(at) + ") of encoding '" + encoding_.name +
                          "', which is not allowed here; allow it, or encode it as plain text");
      }
    }
  }
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3);
  // Each allowed special's next occurrence at or after `start`, searched again only once
  // `start` has passed it: searching every special from `start` after each one found took time
  // (specials found) x (text length) where one of them never occurs (a corpus of 100k
  // <|endoftext|> with "all" allowed).
  std::vector<size_t> next_at(allowed.size(), 0);
  std::vector<bool> searched(allowed.size(), false);
  size_t start = 0;
  for (;;) {
    // The earliest allowed special at or after start (the longest on a tie).
    size_t next = std::string_view::npos;
    const std::pair<const std::string, uint32_t>* found = nullptr;
    for (size_t k = 0; k < allowed.size(); ++k) {
      const auto* entry = allowed[k];
      if (!searched[k] || (next_at[k] != std::string_view::npos && next_at[k] < start)) {
        next_at[k] = text.find(entry->first, start);
        searched[k] = true;
      }
      const size_t at = next_at[k];
      if (at < next || (at == next && at != std::string_view::npos &&
                        entry->first.size() > found->first.size())) {
        next = at;
        found = entry;
      }
    }
    encode_valid(text.substr(start, next == std::string_view::npos ? text.npos : next - start),
                 out);
    if (!found) break;
    out.push_back(found->second);
    start = next + found->first.size();
  }
  return out;
}

std::string BpeTokenizer::decode(const uint32_t* ids, size_t count) const {
  std::string out;
  for (size_t i = 0; i < count; ++i) {
    const std::string* bytes = token_bytes(ids[i]);
    if (!bytes) {
      throw ConfigError("token id " + std::to_string(ids[i]) + " (position " + std::to_string(i) +
                        ") is no token of encoding '" + encoding_.name + "' (" +
                        std::to_string(vocab_size_) +
                        " ids); were these ids made with another tokenizer?");
    }
    out += *bytes;
  }
  return out;
}

}  // namespace zt::data
