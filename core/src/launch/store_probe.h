// Waiting for rank 0's rendezvous store to accept connections before a TCPStore client connects.
//
// Why: LibTorch 1.13's TCPStore client, refused because nothing listens yet, sleeps a whole second
// before it tries again. zt's launcher starts every rank at once, so a rank other than 0 nearly
// always came before rank 0 listened and lost that second: measured on a 2-core VM, a 4-step
// 2-rank job's ranks sat idle 1.0 s of their 1.3 s (strace: ECONNREFUSED, then a 1 s sleep).
// A plain TCP connect every 5 ms finds the store as soon as it listens; TCPStore then connects
// at its first try. The probe's connection is closed at once, which the store's server takes as a
// client that left.
// Thread safety: a free function with no shared state.
#pragma once

#include <chrono>
#include <string>

namespace zt {

// Tries a TCP connection to `host`:`port` (every address it resolves to, resolved once) until one
// is accepted, every 5 ms, until `deadline`. "" when one was accepted; else why none was by the
// deadline: "nothing accepted a connection there", or, while the name does not resolve (it is
// asked again each try: a host's name may appear as its node starts), the resolver's answer.
// A slow resolver can hold a try past `deadline` by its own timeout.
std::string wait_until_accepting(const std::string& host, int port,
                                 std::chrono::steady_clock::time_point deadline);

}  // namespace zt
