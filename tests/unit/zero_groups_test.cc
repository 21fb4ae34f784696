// ZeroGroups::check_device (core/src/zero/zero_groups.h): the engine refuses, before it makes any
// buffer, a communicator that moves tensors of another device than the engine's.
#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "solo_communicator.h"
#include "zero/zero_groups.h"
#include "zt/error.h"

namespace {

std::string refusal(zt::Communicator& world, c10::Device engine_device) {
  const zt::ZeroGroups groups(world, {});
  try {
    groups.check_device(engine_device);
  } catch (const zt::ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("ZeroGroups::check_device: the engine and its communicators must be on one device") {
  zt::test::SoloCommunicator host(c10::Device(c10::kCPU)), gpu(c10::Device(c10::kCUDA, 1));
  CHECK(refusal(host, c10::Device(c10::kCPU)).empty());
  CHECK(refusal(gpu, c10::Device(c10::kCUDA, 1)).empty());
  const std::string why = refusal(gpu, c10::Device(c10::kCPU));
  INFO(why);
  CHECK(why.find("comm plugin solo moves tensors on cuda:1") != std::string::npos);
  CHECK(why.find("the engine keeps its buffers on cpu") != std::string::npos);
  CHECK(why.find("plugins.comm") != std::string::npos);
  CHECK_FALSE(refusal(host, c10::Device(c10::kCUDA, 0)).empty());
  CHECK_FALSE(refusal(gpu, c10::Device(c10::kCUDA, 0)).empty());  // another GPU
}
