#include "common/two_hosts.h"

#include <cstdio>
#include <sstream>

#include "zt/error.h"

namespace zt::bench {

std::string two_hosts_script(const std::string& root) { return root + "/scripts/two_hosts.sh"; }

ShellResult two_hosts(const std::string& root, const std::string& args) {
  return run_shell(two_hosts_script(root) + " " + args);
}

namespace {

// Never throws: it runs while an error or a stop unwinds (a down that cannot start leaves the
// namespaces, which `two_hosts.sh down NAME` removes by hand).
void take_down(const std::string& root, const std::string& name) noexcept {
  try {
    run_shell(two_hosts_script(root) + " down " + name, /*clean_up=*/true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cannot take the simulated hosts %s down: %s\n", name.c_str(), e.what());
  }
}

}  // namespace

SimulatedHosts::SimulatedHosts(const std::string& root, const std::string& name,
                               const std::string& rate, const std::string& bench)
    : root_(root), name_(name) {
  ShellResult up;
  try {
    up = two_hosts(root, "up " + name + (rate == "none" ? "" : " " + shell_quote(rate)));
  } catch (...) {
    take_down(root, name);  // a stop signal while they came up: what came up goes
    throw;
  }
  if (up.exit_code != 0) {
    take_down(root, name);
    throw ConfigError(bench + ": link " + rate + ": " + up.output);
  }
}

SimulatedHosts::~SimulatedHosts() { take_down(root_, name_); }

double link_bytes(const std::string& root, const std::string& name, const std::string& bench) {
  const ShellResult r = two_hosts(root, "bytes " + name);
  double a = 0, b = 0;
  if (r.exit_code != 0 || std::sscanf(r.output.c_str(), "%lf %lf", &a, &b) != 2)
    throw IoError(bench + ": cannot read the link's counters: " + r.output);
  return a + b;
}

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace zt::bench
