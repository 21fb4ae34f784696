// A step of a job that only rank 0 takes (a folder's lock, a folder it makes), whose failure must
// be every rank's: thrown on rank 0 alone, the others went on into the next collective, and rank
// 0's communicator waited launch.timeout_s for them in its closing barrier before the error was
// said. Rank 0 says how its step went under a store key the others wait for.
// Thread safety: the thread that runs the job's collectives.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "zt/store.h"

namespace zt::trainer {

// Runs `step` on rank 0 of `world` and publishes under `key` (one per step) whether it failed;
// rank 0 rethrows its error once the others read it (or after `timeout`). The other ranks wait
// for the word (up to `timeout`) and, when rank 0's step failed, throw an error of its kind that
// says so, naming `what` and rank 0's error.
void rank0_step(Store& store, const std::string& key, int rank, int world,
                std::chrono::milliseconds timeout, const std::string& what,
                const std::function<void()>& step);

// Throws an Error of `kind` (an ErrorKind's value; anything else is an InternalError) with
// `message`: another rank's error here, of its kind (an IoError stays one a restart may cure, a
// config error is not restarted).
[[noreturn]] void throw_of_kind(int kind, const std::string& message);

}  // namespace zt::trainer
