// UTF-8 as the tokenizers' references read it. js-tiktoken (Node's Buffer.toString('utf8')),
// tiktoken (Python's bytes.decode(errors='replace')) and the WHATWG Encoding standard turn bytes
// that are not UTF-8 into text the same way: each maximal ill-formed subpart becomes one U+FFFD.
// zt's BPE encoder does the same before it splits text, so its ids equal theirs on any bytes, and
// the trace writer does it so a path in a trace stays JSON.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "zt/api.h"

namespace zt {

// Whether `bytes` is well-formed UTF-8 (no surrogates, no overlong forms, nothing past U+10FFFF).
ZT_API bool is_valid_utf8(std::string_view bytes);

// `bytes` with every maximal ill-formed subpart replaced by U+FFFD (EF BF BD); valid input comes
// back unchanged.
ZT_API std::string replace_invalid_utf8(std::string_view bytes);

// The number of bytes of `bytes`' longest prefix that ends on a code point boundary of valid
// UTF-8 (a stream reader keeps the rest for the next chunk). Counts an ill-formed sequence as
// complete, since more bytes cannot make it valid.
ZT_API size_t complete_utf8_prefix(std::string_view bytes);

}  // namespace zt
