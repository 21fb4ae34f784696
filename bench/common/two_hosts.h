// Two simulated hosts for the benches that cross a link (mics, codec): scripts/two_hosts.sh,
// its link's byte counters, and the rate lists the benches take.
// Thread safety: none needed; one thread runs the bench.
#pragma once

#include <string>
#include <vector>

#include "common/shell.h"

namespace zt::bench {

// scripts/two_hosts.sh under the source folder `root`.
std::string two_hosts_script(const std::string& root);
// Runs `two_hosts.sh ARGS`.
ShellResult two_hosts(const std::string& root, const std::string& args);
// Bytes both hosts of link NAME have sent over it so far. Throws IoError naming `bench` when the
// counters cannot be read.
double link_bytes(const std::string& root, const std::string& name, const std::string& bench);

// "a,b,c" as its items (a rate list such as "none,1gbit,200mbit").
std::vector<std::string> split_list(const std::string& list);

}  // namespace zt::bench
