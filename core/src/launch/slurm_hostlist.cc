#include "zt/host/slurm_hostlist.h"

#include <cctype>
#include <string>
#include <vector>

#include "zt/error.h"

namespace zt {

namespace {

struct Parse {
  const std::string& list;
  const std::string& variable;
  size_t limit;

  [[noreturn]] void refuse(const std::string& why) const {
    throw ConfigError(variable + "='" + list + "' is not a Slurm hostlist: " + why +
                      "; set MASTER_ADDR (and MASTER_PORT) to rank 0's host for every rank "
                      "instead");
  }

  // "01-04,07" -> 01 02 03 04 07: each range's numbers padded to its first number's width.
  std::vector<std::string> numbers(const std::string& inside) const {
    std::vector<std::string> out;
    size_t at = 0;
    while (true) {
      const size_t comma = inside.find(',', at);
      const std::string range = inside.substr(at, comma == std::string::npos ? comma : comma - at);
      const size_t dash = range.find('-');
      const std::string lo = range.substr(0, dash);
      const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
      auto digits = [](const std::string& s) {
        if (s.empty() || s.size() > 9) return false;
        for (char c : s) {
          if (!std::isdigit(static_cast<unsigned char>(c))) return false;
        }
        return true;
      };
      if (!digits(lo) || !digits(hi)) {
        refuse("the range '" + range + "' in [" + inside + "] is not N or N-M with digits");
      }
      const int64_t first = std::stoll(lo), last = std::stoll(hi);
      if (last < first) refuse("the range '" + range + "' descends");
      // The bracket's running total, not each range's: [0-999999,0-999999,...] would otherwise
      // fill memory one range at a time.
      if (static_cast<size_t>(last - first) >= limit - std::min(limit, out.size())) {
        refuse("it names more than " + std::to_string(limit) + " hosts");
      }
      for (int64_t n = first; n <= last; ++n) {
        std::string s = std::to_string(n);
        if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
        out.push_back(std::move(s));
      }
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    return out;
  }

  // One host expression: text and brackets, the first bracket varying slowest.
  void host(const std::string& expr, std::vector<std::string>& out) const {
    std::vector<std::string> names = {""};
    size_t at = 0;
    bool bracketed = false;
    while (at < expr.size()) {
      const size_t open = expr.find('[', at);
      const std::string text = expr.substr(at, open == std::string::npos ? open : open - at);
      if (text.find(']') != std::string::npos) refuse("a ']' closes no '['");
      if (open == std::string::npos) {
        if (bracketed) refuse("'" + expr + "' has text after its last bracket");
        for (std::string& n : names) n += text;
        break;
      }
      const size_t close = expr.find(']', open);
      if (close == std::string::npos) refuse("a '[' in '" + expr + "' is never closed");
      const std::string inside = expr.substr(open + 1, close - open - 1);
      if (inside.find('[') != std::string::npos) refuse("brackets nest in '" + expr + "'");
      const std::vector<std::string> nums = numbers(inside);
      if (names.size() * nums.size() > limit) {
        refuse("it names more than " + std::to_string(limit) + " hosts");
      }
      std::vector<std::string> grown;
      grown.reserve(names.size() * nums.size());
      for (const std::string& n : names) {
        for (const std::string& num : nums) grown.push_back(n + text + num);
      }
      names = std::move(grown);
      bracketed = true;
      at = close + 1;
    }
    if (out.size() + names.size() > limit) {
      refuse("it names more than " + std::to_string(limit) + " hosts");
    }
    out.insert(out.end(), names.begin(), names.end());
  }
};

}  // namespace

std::vector<std::string> expand_slurm_hostlist(const std::string& list, const std::string& variable,
                                               size_t limit) {
  const Parse p{list, variable, limit};
  std::vector<std::string> out;
  // Commas outside brackets separate hosts; inside they separate ranges. Empty entries (a
  // trailing comma) name nothing, as in Slurm.
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) p.refuse("a ']' closes no '['");
    if (c != ',' || depth > 0) continue;
    if (i > start) p.host(list.substr(start, i - start), out);
    start = i + 1;
  }
  if (depth > 0) p.refuse("a '[' is never closed");
  if (out.empty()) p.refuse("it names no host");
  return out;
}

int job_rendezvous_port(int64_t job_id) { return 15000 + static_cast<int>(job_id % 10000); }

}  // namespace zt
