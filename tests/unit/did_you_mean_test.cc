// Suggestions for misspelled keys and ids.
#include <doctest/doctest.h>

#include "zt/host/did_you_mean.h"

TEST_CASE("closest_match suggests near misses and abbreviations, not unrelated words") {
  std::vector<std::string> keys = {"bucket_mb", "stage", "reduce_bucket_mb", "prefetch_units"};
  CHECK(zt::closest_match("bucket_sz", keys) == "bucket_mb");
  CHECK(zt::closest_match("stgae", keys) == "stage");
  CHECK(zt::closest_match("prefetch", keys) == "prefetch_units");
  CHECK(zt::closest_match("learning_rate", keys).empty());
  CHECK(zt::did_you_mean("stag", keys) == " (did you mean 'stage'?)");
  CHECK(zt::did_you_mean("zzzzzz", keys).empty());
  // A near miss beats a longer key that merely contains the word.
  CHECK(zt::closest_match("chunk_k", {"shm_chunk_kb", "chunk_kb"}) == "chunk_kb");
}
