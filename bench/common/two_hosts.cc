#include "common/two_hosts.h"

#include <cstdio>
#include <sstream>

#include "zt/error.h"

namespace zt::bench {

std::string two_hosts_script(const std::string& root) { return root + "/scripts/two_hosts.sh"; }

ShellResult two_hosts(const std::string& root, const std::string& args) {
  return run_shell(two_hosts_script(root) + " " + args);
}

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
