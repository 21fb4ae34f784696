// PCRE2 with UTF, UCP and the JIT. Matching needs per-thread scratch (match data and a JIT
// stack), kept in a thread_local so a tokenizer shared by worker threads allocates it once per
// thread, not once per document.
#include "data/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "zt/error.h"

namespace zt::data {

namespace {

// JavaScript's \s: WhiteSpace and LineTerminator of ECMA-262, as members of a character class.
constexpr const char* kJsSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}\\x{FEFF}";

// A JIT stack well above what these patterns use; past it a match falls back to the
// interpreter instead of failing.
constexpr size_t kJitStackBytes = 1 << 20;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

bool is_ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

std::string Pretokenizer::to_pcre2(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  // Depth of groups, and the depth at which a (?i: group opened (-1 = not inside one).
  int depth = 0, caseless_depth = -1;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kJsSpace) : "[" + std::string(kJsSpace) + "]";
      } else if (e == 'S') {
        if (in_class) {
          // A user's encoding may hold one ([^\S\r\n]): its file is wrong for zt, not zt.
          throw ConfigError("\\S inside a character class (as in [^\\S\\r\\n]) has no "
                            "rewrite to JavaScript's \\s; write that class as a lookahead, "
                            "e.g. (?:(?![\\r\\n])\\s)");
        }
        out += "[^" + std::string(kJsSpace) + "]";
      } else {
        out += c;
        out += e;
        // An escape's braced argument (\p{Lu}, \x{0B}) is copied whole: no case folding in it.
        if (i + 1 < pattern.size() && pattern[i + 1] == '{') {
          const size_t close = pattern.find('}', i + 1);
          const size_t end = close == std::string::npos ? pattern.size() : close + 1;
          out.append(pattern, i + 1, end - (i + 1));
          i = end - 1;
        }
      }
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      if (caseless_depth >= 0 && is_ascii_letter(c)) {
        // Inside (?i:) a class's letters match both cases too, as in every engine tiktoken's
        // patterns are written for ("'(?i:[sdmt]|ll|ve|re)", cl100k's newer spelling).
        const char other = static_cast<char>(c ^ 0x20);
        const bool range = i + 2 < pattern.size() && pattern[i + 1] == '-' &&
                           is_ascii_letter(pattern[i + 2]) &&
                           ((pattern[i + 2] ^ c) & 0x20) == 0;  // both ends of one case
        out += c;
        if (range) {
          out += '-';
          out += pattern[i + 2];
          out += other;
          out += '-';
          out += static_cast<char>(pattern[i + 2] ^ 0x20);
          i += 2;
        } else {
          out += other;
        }
        continue;
      }
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      // A ']' or '^]' right after the opening bracket is a member, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == '(') {
      ++depth;
      if (pattern.compare(i, 4, "(?i:") == 0) {
        out += "(?:";
        if (caseless_depth < 0) caseless_depth = depth;
        i += 3;
        continue;
      }
    } else if (c == ')') {
      if (depth == caseless_depth) caseless_depth = -1;
      --depth;
    } else if (caseless_depth >= 0 && is_ascii_letter(c)) {
      out += '[';
      out += static_cast<char>(c | 0x20);
      out += static_cast<char>(c & ~0x20);
      out += ']';
      continue;
    }
    out += c;
  }
  return out;
}

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

Pretokenizer::Pretokenizer(const std::string& pattern, const std::string& what)
    : compiled_(std::make_unique<Compiled>()), what_(what) {
  std::string rewritten;
  try {
    rewritten = to_pcre2(pattern);
  } catch (const ConfigError& e) {
    throw ConfigError(what + ": its split pattern: " + e.what() +
                      " in the encoding file's pat_str");
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset,
                                  nullptr);
  if (!compiled_->code) {
    throw ConfigError(what + ": its split pattern does not compile (PCRE2: " +
                      pcre2_message(error) + " at offset " + std::to_string(offset) + " of '" +
                      rewritten + "'); check the encoding file's pat_str");
  }
  // Without the JIT (a build of PCRE2 without it) the interpreter gives the same pieces, slower.
  (void)pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

Pretokenizer::~Pretokenizer() = default;

namespace {

// One thread's matching scratch for one compiled pattern.
struct Scratch {
  const pcre2_code* code = nullptr;
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;

  void reset(const pcre2_code* for_code) {
    release();
    code = for_code;
    data = pcre2_match_data_create_from_pattern(for_code, nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, kJitStackBytes, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (!data || !stack || !context) throw IoError("pretokenizer: out of memory for PCRE2 scratch");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  void release() {
    pcre2_match_data_free(data);
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    data = nullptr;
    stack = nullptr;
    context = nullptr;
  }
  ~Scratch() { release(); }
};

}  // namespace

void Pretokenizer::split(std::string_view text, std::vector<Piece>& out) const {
  thread_local Scratch scratch;
  if (scratch.code != compiled_->code) scratch.reset(compiled_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  PCRE2_SIZE at = 0;
  while (at < text.size()) {
    int rc = pcre2_match(compiled_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK,
                         scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(compiled_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       scratch.data, scratch.context);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      throw InternalError(what_ + ": splitting text failed at byte " + std::to_string(at) +
                          " (PCRE2: " + pcre2_message(rc) + ")");
    }
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(scratch.data);
    if (span[1] == span[0]) {
      // An empty match: step over one code point, as a global JavaScript regex does.
      at = span[1] + 1;
      while (at < text.size() && (static_cast<uint8_t>(text[at]) & 0xC0) == 0x80) ++at;
      continue;
    }
    out.push_back({static_cast<uint32_t>(span[0]), static_cast<uint32_t>(span[1] - span[0])});
    at = span[1];
  }
}

}  // namespace zt::data
