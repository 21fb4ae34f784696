// What every zt benchmark shares: medians, JSON spelling, command-line numbers, and the main()
// wrapper that turns errors into one line and an exit code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::bench {

// The median of `values` (mean of the middle two for an even count); NaN when empty.
double median(std::vector<double> values);

// JSON has no NaN or infinity: those become null.
std::string json_number(double v);
std::string json_string(const std::string& s);

// A positive integer given to `flag`, else ConfigError quoting `usage`.
int64_t parse_positive(const std::string& text, const std::string& flag, const char* usage);
// "a,b,c" of positive integers.
std::vector<int64_t> parse_positive_list(const std::string& list, const std::string& flag,
                                         const char* usage);

// Runs `run(args)` as the program `name`: zt errors become "name: kind error: ..." and their
// exit code, other exceptions exit 1.
int bench_main(const std::string& name, int argc, char** argv,
               int (*run)(const std::vector<std::string>&));

}  // namespace zt::bench
