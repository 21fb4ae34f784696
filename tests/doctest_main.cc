// The one doctest main every zt test executable links, with a listener that counts the checks
// the running test case has failed: tests/skip.h refuses to report a case Skipped after one.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>

#include "skip.h"

namespace {

std::atomic<int> failed_in_case{0};

class FailedChecks : public doctest::IReporter {
 public:
  explicit FailedChecks(const doctest::ContextOptions&) {}
  void test_case_start(const doctest::TestCaseData&) override { failed_in_case = 0; }
  void log_assert(const doctest::AssertData& check) override {
    if (check.m_failed) ++failed_in_case;
  }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("zt_failed_checks", 1, FailedChecks);

}  // namespace

namespace zt::test {

int checks_failed_in_this_case() { return failed_in_case; }

}  // namespace zt::test
