// Agreements across the ranks of a job: one small all_reduce so that every rank takes the same
// branch after it (stop at a signal, skip a save, give up where one rank failed), instead of some
// ranks going on into collectives the others never reach.
// Thread safety: collective calls; one thread per rank, in the same order on every rank.
#pragma once

#include <cstdint>
#include <string>

#include "zt/api.h"

namespace zt {

class Communicator;

// The largest of every rank's `value`. Values travel as fp32: flags, signal numbers and ranks
// are exact (up to 2^24).
// Throws what the communicator throws (CommError on a failed or timed-out all_reduce).
ZT_API float max_over_ranks(Communicator& comm, float value);

// The highest rank on which `failed` is true, or -1 where it is false on every rank.
// Throws as max_over_ranks.
ZT_API int highest_failed_rank(Communicator& comm, bool failed);

// A number for `text` that every process computes alike (FNV-1a over its bytes), for fingerprints
// the ranks compare.
ZT_API uint64_t fingerprint_of(const std::string& text);

// The lowest rank whose `fingerprint` differs from rank 0's, or -1 where every rank has rank 0's:
// whether the ranks asked for the same thing before collectives that each item of it drives.
// Throws as max_over_ranks.
ZT_API int first_rank_differing(Communicator& comm, uint64_t fingerprint);

}  // namespace zt
