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

// The two hosts `name`, up with their link at `rate` ("none": unshaped) while it lives, taken
// down when it goes: after an error, and after a stop signal (stop_on_signals), which a `down`
// in a catch block did not survive (it threw before it ran), leaving the namespaces behind.
// Throws ConfigError naming `bench` and the link when they cannot come up (taken down then too).
class SimulatedHosts {
 public:
  SimulatedHosts(const std::string& root, const std::string& name, const std::string& rate,
                 const std::string& bench);
  ~SimulatedHosts();
  SimulatedHosts(const SimulatedHosts&) = delete;
  SimulatedHosts& operator=(const SimulatedHosts&) = delete;

 private:
  std::string root_, name_;
};
// Bytes both hosts of link NAME have sent over it so far. Throws IoError naming `bench` when the
// counters cannot be read.
double link_bytes(const std::string& root, const std::string& name, const std::string& bench);

// "a,b,c" as its items (a rate list such as "none,1gbit,200mbit").
std::vector<std::string> split_list(const std::string& list);

}  // namespace zt::bench
